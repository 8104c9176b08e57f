// The page's two DOM helpers. Every server string goes in as text (textContent only:
// never parsed as markup).

export const $ = (id) => document.getElementById(id);

// A `tag` element holding `content` as text (none when `content` is undefined).
export function text(tag, content, className = "") {
  const element = document.createElement(tag);
  if (content !== undefined) element.textContent = String(content);
  if (className) element.className = className;
  return element;
}
