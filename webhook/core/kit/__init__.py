"""Small pure pieces every layer of the core uses: paths, text, quantities, tolerations."""
