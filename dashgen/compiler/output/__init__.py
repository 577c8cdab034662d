"""The compiled project -> the files of rendered/: one renderer per artefact (targets/), the checks staged
before the tree is replaced, and the writer that replaces it whole."""
