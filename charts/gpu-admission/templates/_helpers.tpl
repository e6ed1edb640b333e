{{/* Names: fullname is cut at 40 so that every derived name ("-certs-cabundle", the
CronJob's Jobs) stays within the 63 characters of a label value. */}}
{{- define "gpu-admission.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" }}
{{- end }}

{{- define "gpu-admission.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gpu-admission.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu-admission.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpu-admission.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "gpu-admission.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpu-admission
{{- end }}

{{/* The webhook Pods: what the Deployment, Service, PDB and NetworkPolicy select. */}}
{{- define "gpu-admission.podLabels" -}}
{{ include "gpu-admission.selectorLabels" . }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "gpu-admission.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "gpu-admission.tlsSecret" -}}
{{- default (printf "%s-tls" (include "gpu-admission.fullname" .)) .Values.tls.secretName }}
{{- end }}

{{- define "gpu-admission.policiesConfigMap" -}}
{{- default (printf "%s-policies" (include "gpu-admission.fullname" .)) .Values.policies.existingConfigMap }}
{{- end }}

{{- define "gpu-admission.inventoryConfigMap" -}}
{{- default (printf "%s-inventory" (include "gpu-admission.fullname" .)) .Values.inventory.existingConfigMap }}
{{- end }}

{{/* The DNS name the apiserver dials, and the serving certificate must cover. */}}
{{- define "gpu-admission.serviceHost" -}}
{{- printf "%s.%s.svc" (include "gpu-admission.fullname" .) .Release.Namespace }}
{{- end }}

{{/* Checks values that the schema cannot relate to each other. */}}
{{- define "gpu-admission.validate" -}}
{{- $tls := .Values.tls }}
{{- if and (eq $tls.mode "secret") $tls.secret.create (not (and $tls.secret.cert $tls.secret.key $tls.secret.ca)) }}
{{- fail "tls.mode=secret with tls.secret.create=true needs tls.secret.cert, tls.secret.key and tls.secret.ca (PEM), e.g. --set-file tls.secret.cert=tls.crt,tls.secret.key=tls.key,tls.secret.ca=ca.crt" }}
{{- end }}
{{- if and (eq $tls.mode "secret") (not $tls.secret.create) (not $tls.secret.caBundle) }}
{{- fail "tls.mode=secret with an existing Secret needs tls.secret.caBundle: the CA (PEM) that signed its certificate, or the apiserver cannot verify the webhook" }}
{{- end }}
{{- if and (eq $tls.mode "certsJob") (ge (int $tls.certsJob.renewBeforeDays) (int $tls.certsJob.days)) }}
{{- fail (printf "tls.certsJob.renewBeforeDays (%v) must be less than tls.certsJob.days (%v), or every run would issue a new certificate" $tls.certsJob.renewBeforeDays $tls.certsJob.days) }}
{{- end }}
{{- if and (eq .Values.inventory.source "file") (not .Values.inventory.nodes) (not .Values.inventory.existingConfigMap) }}
{{- fail "inventory.source=file needs inventory.nodes (--set-file inventory.nodes=nodes.json, the output of kubectl get nodes -o json) or inventory.existingConfigMap" }}
{{- end }}
{{- if and (not .Values.policies.existingConfigMap) (not .Values.policies.shipped) (not .Values.policies.files) }}
{{- fail "no policies: policies.shipped is false and policies.files and policies.existingConfigMap are empty" }}
{{- end }}
{{- if and .Values.networkPolicy.enabled (not .Values.networkPolicy.apiserverCIDRs) }}
{{- fail "networkPolicy.enabled needs networkPolicy.apiserverCIDRs: the addresses the apiserver connects from (it is not a Pod, so no selector can find it)" }}
{{- end }}
{{- end }}

{{/*
The caBundle the webhook configuration carries, base64, or "" to leave the field out.
- certsJob: what the certs Job last put there (read back from the cluster), so that an
  upgrade never drops it and a new webhook entry gets it at once; on the first install
  there is nothing yet and the post-install Job fills it in.
- certManager: nothing; cert-manager's cainjector owns the field.
- secret: the CA given, plus the CA the Secret held before this upgrade.
*/}}
{{- define "gpu-admission.caBundle" -}}
{{- $tls := .Values.tls }}
{{- if eq $tls.mode "certsJob" }}
{{- $live := lookup "admissionregistration.k8s.io/v1" "ValidatingWebhookConfiguration" "" (include "gpu-admission.fullname" .) }}
{{- $bundle := "" }}
{{- range (dig "webhooks" (list) $live) }}
{{- if not $bundle }}{{ $bundle = dig "clientConfig" "caBundle" "" . }}{{ end }}
{{- end }}
{{- $bundle }}
{{- else if and (eq $tls.mode "secret") $tls.secret.create }}
{{- $new := trim $tls.secret.ca }}
{{- $live := lookup "v1" "Secret" .Release.Namespace (include "gpu-admission.tlsSecret" .) }}
{{- $old := dig "data" "ca.crt" "" $live | b64dec | trim }}
{{- if and $old (ne $old $new) }}
{{- printf "%s\n%s\n" $new $old | b64enc }}
{{- else }}
{{- printf "%s\n" $new | b64enc }}
{{- end }}
{{- else if eq $tls.mode "secret" }}
{{- printf "%s\n" (trim $tls.secret.caBundle) | b64enc }}
{{- end }}
{{- end }}

{{/*
The filter every core webhook entry carries, at one kind's pod spec and metadata paths:
one expression, so that the entries cannot drift apart (docs/deploy.md explains it).
*/}}
{{- /* gpu-admission.matchConditions, .podUpdateCondition and .namespaceConditions are
generated into _matchconditions.tpl (scripts/sync-manifest-policies). */ -}}

{{/* The fields every webhook entry shares. */}}
{{- define "gpu-admission.webhookCommon" -}}
{{- $bundle := include "gpu-admission.caBundle" . }}
sideEffects: None
admissionReviewVersions: [v1]
timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
failurePolicy: {{ .Values.webhook.failurePolicy }}
matchPolicy: Equivalent
clientConfig:
  service:
    namespace: {{ .Release.Namespace }}
    name: {{ include "gpu-admission.fullname" . }}
    path: /validate
    port: {{ .Values.service.port }}
  {{- if $bundle }}
  caBundle: {{ $bundle }}
  {{- end }}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        {{- range concat (list "kube-system" .Release.Namespace) .Values.webhook.excludedNamespaces | uniq }}
        - {{ . }}
        {{- end }}
    {{- if .Values.webhook.exemptLabel.enabled }}
    - key: {{ .Values.webhook.exemptLabel.key }}
      operator: NotIn
      values: ["true"]
    {{- end }}
{{- end }}

{{/*
The Pod of a certs Job: `gpu-admission certs` with the chart's image, restricted like
the webhook. Arguments: root (the chart context), serviceAccount, patchWebhook (bool).
*/}}
{{- define "gpu-admission.certsPod" -}}
{{- $root := .root }}
metadata:
  labels:
    {{- include "gpu-admission.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: certs
spec:
  serviceAccountName: {{ .serviceAccount }}
  restartPolicy: OnFailure
  enableServiceLinks: false
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  {{- with $root.Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: certs
      image: {{ include "gpu-admission.image" $root }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        - certs
        - --service
        - {{ include "gpu-admission.fullname" $root }}
        - --namespace
        - $(POD_NAMESPACE)
        - --out
        - /out
        - --days
        - {{ $root.Values.tls.certsJob.days | quote }}
        - --renew-before-days
        - {{ $root.Values.tls.certsJob.renewBeforeDays | quote }}
        - --apply-secret
        - {{ include "gpu-admission.tlsSecret" $root }}
        {{- if .patchWebhook }}
        - --patch-webhook
        - {{ include "gpu-admission.fullname" $root }}
        {{- end }}
      env:
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
      resources:
        {{- toYaml $root.Values.tls.certsJob.resources | nindent 8 }}
      securityContext:
        allowPrivilegeEscalation: false
        privileged: false
        readOnlyRootFilesystem: true
        runAsNonRoot: true
        capabilities:
          drop: [ALL]
        seccompProfile:
          type: RuntimeDefault
      volumeMounts:
        - name: out
          mountPath: /out
  volumes:
    - name: out
      emptyDir:
        medium: Memory
        sizeLimit: 1Mi
{{- end }}

{{/*
What a certs service account may do, and nothing more: write one Secret in the release
namespace and the caBundle of one webhook configuration. Arguments: root, name, hook
(annotations for hook objects, or nil).
*/}}
{{- define "gpu-admission.certsRBAC" -}}
{{- $root := .root }}
{{- $labels := include "gpu-admission.labels" $root }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- $labels | nindent 4 }}
  {{- with .hook }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- $labels | nindent 4 }}
  {{- with .hook }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
rules:
  # RBAC cannot limit create to a name (the name is not known before the object
  # exists); create is harmless without get/patch on other Secrets.
  - apiGroups: [""]
    resources: [secrets]
    verbs: [create]
  - apiGroups: [""]
    resources: [secrets]
    resourceNames: [{{ include "gpu-admission.tlsSecret" $root }}]
    verbs: [get, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- $labels | nindent 4 }}
  {{- with .hook }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ $root.Release.Namespace }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .name }}
  labels:
    {{- $labels | nindent 4 }}
  {{- with .hook }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
rules:
  - apiGroups: [admissionregistration.k8s.io]
    resources: [validatingwebhookconfigurations, mutatingwebhookconfigurations]
    resourceNames: [{{ include "gpu-admission.fullname" $root }}]
    verbs: [get, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .name }}
  labels:
    {{- $labels | nindent 4 }}
  {{- with .hook }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .name }}
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
