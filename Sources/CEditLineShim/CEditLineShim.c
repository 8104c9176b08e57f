#include "CEditLineShim.h"

#include <stdio.h>
#include <string.h>

EditLine *vl_el_open(const char *program) {
    EditLine *el = el_init(program, stdin, stdout, stderr);
    if (el == NULL) return NULL;
    el_set(el, EL_EDITOR, "emacs");
    // No EL_SIGNAL: the REPL handles SIGINT itself (Ctrl-C clears the line).
    el_source(el, NULL);  // the user's ~/.editrc, if any
    return el;
}

void vl_el_close(EditLine *el) { el_end(el); }

void vl_el_set_prompt(EditLine *el, vl_prompt_fn prompt) { el_set(el, EL_PROMPT, prompt); }

void vl_el_set_getc(EditLine *el, vl_getc_fn getc) { el_set(el, EL_GETCFN, getc); }

void vl_el_set_completion(EditLine *el, vl_command_fn complete) {
    el_set(el, EL_ADDFN, "vl-complete", "Complete a command name", complete);
    el_set(el, EL_BIND, "^I", "vl-complete", NULL);
}

void vl_el_refresh(EditLine *el) { el_set(el, EL_REFRESH); }

void vl_el_set_history(EditLine *el, History *h) { el_set(el, EL_HIST, history, h); }

size_t vl_el_text_before_cursor(EditLine *el, char *buffer, size_t size) {
    const LineInfo *info = el_line(el);
    size_t length = (size_t)(info->cursor - info->buffer);
    if (size == 0) return 0;
    if (length >= size) length = size - 1;
    memcpy(buffer, info->buffer, length);
    buffer[length] = '\0';
    return length;
}

void vl_el_clear_line(EditLine *el) {
    const LineInfo *info = el_line(el);
    int after = (int)(info->lastchar - info->cursor);
    el_cursor(el, after);
    el_deletestr(el, (int)(info->lastchar - info->buffer));
}

History *vl_history_open(int size) {
    History *h = history_init();
    if (h == NULL) return NULL;
    HistEvent event;
    history(h, &event, H_SETSIZE, size);
    history(h, &event, H_SETUNIQUE, 1);
    return h;
}

void vl_history_close(History *h) { history_end(h); }

void vl_history_add(History *h, const char *line) {
    HistEvent event;
    history(h, &event, H_ENTER, line);
}

int vl_history_load(History *h, const char *path) {
    HistEvent event;
    return history(h, &event, H_LOAD, path);
}

int vl_history_save(History *h, const char *path) {
    HistEvent event;
    return history(h, &event, H_SAVE, path);
}
