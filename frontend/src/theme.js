// Light or dark: the system's choice unless the person picked one here (kept in localStorage).
const KEY = "vigil-theme";
const systemDark = () => window.matchMedia?.("(prefers-color-scheme: dark)").matches ?? false;

function stored() {
  try { return localStorage.getItem(KEY); } catch { return null; }
}

export function currentTheme() {
  const chosen = stored();
  return chosen === "dark" || chosen === "light" ? chosen : systemDark() ? "dark" : "light";
}

function apply(toggle) {
  const theme = currentTheme();
  const chosen = stored();
  if (chosen) document.documentElement.dataset.theme = chosen;
  else delete document.documentElement.dataset.theme;
  toggle.setAttribute("aria-pressed", String(theme === "dark"));
}

export function wireTheme(toggle) {
  apply(toggle);
  toggle.addEventListener("click", () => {
    const next = currentTheme() === "dark" ? "light" : "dark";
    try {
      // Back to following the system when the choice is what the system says anyway.
      if ((next === "dark") === systemDark()) localStorage.removeItem(KEY);
      else localStorage.setItem(KEY, next);
    } catch { /* private mode: this page only */ document.documentElement.dataset.theme = next; }
    apply(toggle);
  });
  window.matchMedia?.("(prefers-color-scheme: dark)").addEventListener?.("change", () => apply(toggle));
}
