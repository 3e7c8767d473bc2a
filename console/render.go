package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"time"
)

// What every page shares: the frame a page's data goes in, and how a page, a fragment of one, or an
// error page is drawn.

// funcs are the templates' helpers: a task state in short, and a time as the clock, the date or ISO 8601
// (empty for the zero time).
var funcs = template.FuncMap{
	"short": shortState,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("15:04:05.000")
	},
	"date": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"iso": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	},
}

// mustJSON is v as JSON, for an event's data; what the console sends always encodes.
func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// page is what every page template gets.
type page struct {
	Title     string
	Formation string
	CSRF      string
	Nav       string
	Members   []string
	Data      any
}

// newPage is a page of the formation for a signed-in browser (s nil: one not signed in).
func (c *Console) newPage(s *loginSession, title, nav string, data any) page {
	p := page{Title: title, Formation: c.cfg.Roster.Formation, Nav: nav, Data: data}
	if s != nil {
		p.CSRF = s.csrf
	}
	for _, m := range c.members {
		p.Members = append(p.Members, m.Name)
	}
	return p
}

// render executes a template into a buffer first, so a failure is a clear page, not half a page.
func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := c.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		c.log.Error("console: rendering a page", "page", name, "err", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "The console could not draw this page (%s): %v\n", name, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// renderPage serves the whole page, or only the fragment the page's script asked for.
func (c *Console) renderPage(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	if frag := r.Header.Get("X-Console-Fragment"); frag != "" {
		if c.tmpl.Lookup("frag-"+frag) == nil {
			http.Error(w, "no fragment "+frag, http.StatusNotFound)
			return
		}
		c.render(w, status, "frag-"+frag, p)
		return
	}
	c.render(w, status, name, p)
}

// errorData is the error page.
type errorData struct {
	Status  int
	Heading string
	Detail  string
}

// errorPage says what went wrong and what to do, with the status it goes out with.
func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, status int, heading, detail string) {
	c.render(w, status, "error", c.newPage(c.auth.session(r), heading, "", errorData{Status: status, Heading: heading, Detail: detail}))
}
