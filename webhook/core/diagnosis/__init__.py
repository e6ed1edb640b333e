"""Why a GPU Pod is Pending: facts about nodes, Pods and scheduler events, classified by
failure domain into evidence records (docs/diagnose.md).

Pure like the rest of the core: the shells gather the objects (webhook.commands.diagnose
from dumps or a live cluster) and hand the facts in; nothing here reads a file, the API
or the clock.
"""
