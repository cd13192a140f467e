"""Reading a shell line the way bash would, to decide whether it may run unattended: the words
(``words``) and their evaluation (``expand``), the simple commands a line runs (``parse``), the
wrappers that run another command (``wrappers``) and what ``xargs`` gives one (``xargs``), the
commands programs take as text (``embedded``), the paths it writes (``targets``), the rules
(``rules``) and the verdict (``policy``)."""
