package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// cookieName is the session cookie the login sets.
const cookieName = "mur_console"

// sessionTTL is how long a login lasts.
const sessionTTL = 12 * time.Hour

// maxSessions bounds the logins kept; the oldest goes first.
const maxSessions = 64

// loginSession is one browser's login.
type loginSession struct {
	csrf    string
	expires time.Time
}

// auth holds the one-time login code and the sessions it (or the operator token) opened.
type auth struct {
	token string
	now   func() time.Time

	mu       sync.Mutex
	code     string // "" once used
	sessions map[string]*loginSession
}

func newAuth(token string, now func() time.Time) *auth {
	return &auth{token: token, now: now, code: randomString(24), sessions: map[string]*loginSession{}}
}

func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// useCode spends the one-time code: true the first time code matches, false ever after.
func (a *auth) useCode(code string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.code == "" || code == "" || !equal(a.code, code) {
		return false
	}
	a.code = ""
	return true
}

// newCode replaces the login code (a new printed URL) and returns it.
func (a *auth) newCode() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.code = randomString(24)
	return a.code
}

// open starts a session and returns its id.
func (a *auth) open() string {
	id := randomString(32)
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for k, s := range a.sessions {
		if now.After(s.expires) {
			delete(a.sessions, k)
		}
	}
	for len(a.sessions) >= maxSessions {
		var oldest string
		for k, s := range a.sessions {
			if oldest == "" || s.expires.Before(a.sessions[oldest].expires) {
				oldest = k
			}
		}
		delete(a.sessions, oldest)
	}
	a.sessions[id] = &loginSession{csrf: randomString(24), expires: now.Add(sessionTTL)}
	return id
}

// session returns the login of the request's cookie, or nil.
func (a *auth) session(r *http.Request) *loginSession {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[c.Value]
	if s == nil || a.now().After(s.expires) {
		return nil
	}
	return s
}

func (a *auth) close(r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		a.mu.Lock()
		delete(a.sessions, c.Value)
		a.mu.Unlock()
	}
}

func setSessionCookie(w http.ResponseWriter, id string, secure bool) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(sessionTTL / time.Second)})
}

// foreignOrigin returns a description of the other origin a request comes from, or "" when it comes
// from the console's own pages (or from no page at all: a link typed or pasted into the address bar).
func foreignOrigin(r *http.Request) string {
	// A browser says where a request comes from in Sec-Fetch-Site; that is trusted first.
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "same-origin", "none":
		return ""
	case "cross-site", "same-site":
		// A top-level navigation from elsewhere (a link to the console) carries no session cookie from
		// another site (SameSite=Strict); it may see the login page, nothing else. Same-site pages (another
		// port of this host) do send the cookie, so their navigations are held to reading too.
		if r.Method == http.MethodGet && r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Origin") == "" {
			return ""
		}
		return "a " + site + " page"
	}
	// Without it (an older browser, or not a browser): the Origin header, when there is one.
	if o := r.Header.Get("Origin"); o == "null" {
		return "an opaque origin"
	} else if o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return "origin " + o
		}
	}
	return ""
}

// securityHeaders are sent with every answer: no framing, no other origin's scripts, no referrer to other
// origins (the login URL carries a code), nothing cached.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}
