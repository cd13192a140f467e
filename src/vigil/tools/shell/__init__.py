"""Reading a shell line the way bash would, to decide whether it may run unattended: the words
(``words``), the simple commands a line runs (``parse``), the wrappers that run another command
(``wrappers``), the paths it writes (``targets``), the rules (``rules``) and the verdict
(``policy``)."""
