#ifndef VIEWLINE_CEDITLINESHIM_H
#define VIEWLINE_CEDITLINESHIM_H

#include <histedit.h>
#include <stddef.h>
#include <wchar.h>

// el_set, el_get and history are C variadic functions, which Swift cannot call.
// These small non-variadic wrappers are what the REPL uses instead.

typedef int (*vl_getc_fn)(EditLine *, wchar_t *);
typedef char *(*vl_prompt_fn)(EditLine *);
typedef unsigned char (*vl_command_fn)(EditLine *, int);

/// el_init on stdin/stdout/stderr, emacs bindings, terminal size tracking.
EditLine *vl_el_open(const char *program);
void vl_el_close(EditLine *el);
void vl_el_set_prompt(EditLine *el, vl_prompt_fn prompt);
/// The read function libedit calls for every character (EL_GETCFN).
void vl_el_set_getc(EditLine *el, vl_getc_fn getc);
/// Binds Tab to `complete`.
void vl_el_set_completion(EditLine *el, vl_command_fn complete);
/// Redraws the prompt and the line typed so far (EL_REFRESH).
void vl_el_refresh(EditLine *el);
void vl_el_set_history(EditLine *el, History *history);
/// Copies the text before the cursor into `buffer` (NUL-terminated). Returns its length.
size_t vl_el_text_before_cursor(EditLine *el, char *buffer, size_t size);
/// Deletes the whole current line.
void vl_el_clear_line(EditLine *el);

History *vl_history_open(int size);
void vl_history_close(History *history);
void vl_history_add(History *history, const char *line);
int vl_history_load(History *history, const char *path);
int vl_history_save(History *history, const char *path);

#endif
