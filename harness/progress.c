/* progress.c - the running case's progress on the console, and the time
 * left estimated from the finished cases (progress.h). */
#define _GNU_SOURCE
#include "progress.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../common/cmb_clock.h"

/* --- the time left ------------------------------------------------------------------------------ */

double cmb_eta_left(const cmb_eta_case *cases, size_t n, size_t running, double running_s, double running_left)
{
    double all_sum = 0, left = 0;
    size_t all_n = 0;
    for (size_t i = 0; i < n; i++)
        if (cases[i].seconds >= 0) {
            all_sum += cases[i].seconds;
            all_n++;
        }
    for (size_t i = 0; i < n; i++) {
        if (cases[i].seconds >= 0)
            continue;
        if (i == running && running_left >= 0) {
            left += running_left;
            continue;
        }
        double sum = 0;
        size_t k = 0;
        for (size_t j = 0; j < n; j++) /* the mean of its group */
            if (cases[j].seconds >= 0 && cases[j].group == cases[i].group) {
                sum += cases[j].seconds;
                k++;
            }
        double est = k ? sum / (double)k : all_n ? all_sum / (double)all_n : 0;
        if (i == running)
            est = est > running_s ? est - running_s : 0;
        left += est;
    }
    return left;
}

double cmb_progress_left(const cmb_wire_progress *p)
{
    if (!p->seq || !p->done || p->seconds <= 0 || p->done > p->total)
        return -1;
    return (double)(p->total - p->done) * p->seconds / (double)p->done;
}

/* --- the console line --------------------------------------------------------------------------- */

/* 950, 12.3k, 3.2M, 1.5G */
static void count_text(double x, char *out, size_t len)
{
    if (x < 1e4)
        snprintf(out, len, "%.0f", x);
    else if (x < 1e6)
        snprintf(out, len, "%.1fk", x / 1e3);
    else if (x < 1e9)
        snprintf(out, len, "%.1fM", x / 1e6);
    else
        snprintf(out, len, "%.1fG", x / 1e9);
}

void cmb_progress_format(const cmb_wire_progress *p, char *out, size_t len)
{
    char done[32], total[32], rate[32];
    count_text((double)p->done, done, sizeof done);
    count_text((double)p->total, total, sizeof total);
    int used = snprintf(out, len, "%s/%s %s", done, total, p->what);
    if (p->seconds > 0 && p->done && used > 0 && (size_t)used < len) {
        count_text((double)p->done / p->seconds, rate, sizeof rate);
        used += snprintf(out + used, len - (size_t)used, ", %s/s", rate);
    }
    double left = cmb_progress_left(p);
    if (left >= 0 && used > 0 && (size_t)used < len)
        snprintf(out + used, len - (size_t)used, ", ~%.0f s left", left);
}

void cmb_progress_view_init(cmb_progress_view *v, FILE *out)
{
    memset(v, 0, sizeof *v);
    v->out = out;
    v->tty = out && isatty(fileno(out));
    const char *e = getenv("CMB_PROGRESS_LINE_S"); /* tests: a line per record off a terminal */
    v->every_s = e && *e ? atof(e) : 10.0;
}

void cmb_progress_case_start(cmb_progress_view *v, const char *prefix, const char *label, size_t running)
{
    snprintf(v->label, sizeof v->label, "%s", label);
    v->running = running;
    v->case_t0 = cmb_now_s();
    snprintf(v->prefix, sizeof v->prefix, "%s", prefix);
    v->shown = 0;
    v->seen = 0;
    v->last_shown = 0;
    if (!v->out)
        return;
    /* a terminal shows the short label while the case runs (a long name
     * would wrap, and \r rewrites the last row only); the prefix comes back
     * with the result */
    v->shown = v->tty;
    fprintf(v->out, "%s ", v->tty ? v->label : prefix);
    fflush(v->out);
}

static int terminal_width(FILE *f)
{
    struct winsize ws;
    return ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20 ? ws.ws_col : 80;
}

void cmb_progress_show(cmb_progress_view *v, const cmb_wire_progress *p)
{
    char text[192];
    double now = cmb_now_s();
    if (!v->out || !p->seq || p->seq == v->seen)
        return;
    if (!v->tty && v->shown && now - v->last_shown < v->every_s)
        return;
    v->seen = p->seq;
    v->last_shown = now;
    cmb_progress_format(p, text, sizeof text);
    if (v->eta && v->running > 0 && v->running + 1 < v->eta_n) { /* one finished, one to come */
        double left = cmb_eta_left(v->eta, v->eta_n, v->running, now - v->case_t0, cmb_progress_left(p));
        snprintf(text + strlen(text), sizeof text - strlen(text), " (run ~%.0f s)", left);
    }
    if (v->tty) {
        /* one line, cut to the terminal so \r can rewrite it */
        int width = terminal_width(v->out) - 1;
        fprintf(v->out, "\r\033[K%.*s", width, v->label);
        int room = width - (int)strlen(v->label) - 2;
        if (room > 0)
            fprintf(v->out, ": %.*s", room, text);
    } else {
        fprintf(v->out, "%s    %s: %s\n", v->shown ? "" : "\n", v->label, text);
    }
    v->shown = 1;
    fflush(v->out);
}

void cmb_progress_case_end(cmb_progress_view *v)
{
    if (!v->out || !v->shown)
        return;
    fprintf(v->out, "%s%s ", v->tty ? "\r\033[K" : "", v->prefix);
    v->shown = 0;
}
