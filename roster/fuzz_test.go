package roster_test

import (
	"bytes"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc/yamldoctest"
	"github.com/murmur-run/murmur/roster"
)

// fuzzCapsules are the capsule directories the fuzzed rosters can name, relative to the roster.
var fuzzCapsules = []string{"lead", "worker", "solo", "caller", "stranger", "a", "b"}

// FuzzParse parses arbitrary bytes as a roster.yaml. Either the parse fails, and every error is a
// *roster.Error naming the file, a line within it, what is wrong and what to write; or it succeeds,
// and the roster holds what Parse promises (valid unique names, existing capsules, host:port listen
// addresses, door URLs, reach rules between members), and writing it back out as YAML parses to the
// same roster.
func FuzzParse(f *testing.F) {
	dir := f.TempDir()
	for _, n := range fuzzCapsules {
		if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n, "murmur.yaml"), []byte("name: "+n+"\nscript: {command: [cat]}\n"), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "bare"), 0o755)
	os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644)
	path := filepath.Join(dir, "roster.yaml")

	f.Add([]byte(twoMembers))
	f.Add([]byte(twoMembers + "entry: lead\nreach:\n  - {from: lead, to: [worker]}\n  - {from: worker, to: [\"*\"]}\n"))
	f.Add([]byte("formation: t\nmembers:\n  - {name: a, capsule: ./a, listen: '127.0.0.1:0'}\n  - {name: b, capsule: ./b, listen: ':7200', url: 'https://b.example:8443/door/'}\n"))
	f.Add([]byte("formation: t\nmembers:\n  - &m {name: a, capsule: ./a}\n  - *m\n"))
	f.Add([]byte("formation: t\nmembers:\n\t- name: lead\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := roster.Parse(path, data)
		if err != nil {
			yamldoctest.CheckErrors(t, path, data, err, func(e *roster.Error) yamldoctest.Fields {
				return yamldoctest.Fields{File: e.File, Line: e.Line, Msg: e.Msg, Fix: e.Fix}
			})
			return
		}
		checkRoster(t, data, r)
		out := rosterYAML(t, r)
		again, err := roster.Parse(path, out)
		if err != nil {
			t.Fatalf("the roster written back out does not parse: %v\ninput:\n%s\nwritten:\n%s", err, data, out)
		}
		ignoreLines := cmp.FilterPath(func(p cmp.Path) bool {
			sf, ok := p.Last().(cmp.StructField)
			return ok && sf.Name() == "Line"
		}, cmp.Ignore())
		if diff := cmp.Diff(r, again, ignoreLines); diff != "" {
			t.Fatalf("the roster written back out parses differently (-first +again):\n%s\ninput:\n%s\nwritten:\n%s", diff, data, out)
		}
	})
}

var memberName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// checkRoster checks what a parsed roster promises.
func checkRoster(t *testing.T, data []byte, r *roster.Roster) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\ninput:\n%s", append(args, data)...)
	}
	if r.Formation == "" {
		fail("a roster without a formation name parsed")
	}
	if len(r.Members) == 0 {
		fail("a roster without members parsed")
	}
	names := map[string]bool{}
	listens := map[string]string{}
	urls := map[string]string{}
	for _, m := range r.Members {
		if !memberName.MatchString(m.Name) || names[m.Name] {
			fail("member name %q is not valid or not unique", m.Name)
		}
		names[m.Name] = true
		if fi, err := os.Stat(filepath.Join(m.Capsule, "murmur.yaml")); !filepath.IsAbs(m.Capsule) || err != nil || fi.IsDir() {
			fail("member %s's capsule %q is not an absolute capsule directory with a murmur.yaml", m.Name, m.Capsule)
		}
		host, port, err := net.SplitHostPort(m.Listen)
		if err != nil {
			fail("member %s's listen %q is not host:port: %v", m.Name, m.Listen, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			fail("member %s's listen %q has a bad port", m.Name, m.Listen)
		}
		if port != "0" && host != "" {
			if other, dup := listens[m.Listen]; dup {
				fail("members %s and %s both listen on %s", other, m.Name, m.Listen)
			}
			listens[m.Listen] = m.Name
		}
		if m.URL == "" {
			if port != "0" {
				fail("member %s has no URL, though its port %s is known", m.Name, port)
			}
			continue
		}
		u, err := url.Parse(m.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || strings.HasSuffix(m.URL, "/") {
			fail("member %s's URL %q is not an http(s) URL with a host and no trailing slash", m.Name, m.URL)
		}
		if other, dup := urls[m.URL]; dup {
			fail("members %s and %s are both reached at %s", other, m.Name, m.URL)
		}
		urls[m.URL] = m.Name
	}
	if r.Entry != "" && !names[r.Entry] {
		fail("entry %q is no member", r.Entry)
	}
	for _, rule := range r.Reach {
		if !names[rule.From] {
			fail("a reach rule from %q, which is no member", rule.From)
		}
		for _, to := range rule.To {
			if to != "*" && (!names[to] || to == rule.From) {
				fail("a reach rule from %s to %q", rule.From, to)
			}
		}
	}
	for _, m := range r.Members {
		reach := r.Reachable(m.Name)
		if slices.Contains(reach, m.Name) {
			fail("member %s reaches itself", m.Name)
		}
		for _, to := range reach {
			if !names[to] || !r.MayCall(m.Name, to) {
				fail("member %s reaches %q, which MayCall does not allow", m.Name, to)
			}
		}
	}
}

// rosterYAML writes r as a roster.yaml with every default spelled out.
func rosterYAML(t *testing.T, r *roster.Roster) []byte {
	t.Helper()
	type member struct {
		Name    string `yaml:"name"`
		Capsule string `yaml:"capsule"`
		Listen  string `yaml:"listen"`
		URL     string `yaml:"url,omitempty"`
	}
	type rule struct {
		From string   `yaml:"from"`
		To   []string `yaml:"to"`
	}
	doc := struct {
		Formation string   `yaml:"formation"`
		Entry     string   `yaml:"entry,omitempty"`
		Members   []member `yaml:"members"`
		Reach     []rule   `yaml:"reach,omitempty"`
	}{Formation: r.Formation, Entry: r.Entry}
	for _, m := range r.Members {
		doc.Members = append(doc.Members, member{m.Name, m.Capsule, m.Listen, m.URL})
	}
	for _, ru := range r.Reach {
		doc.Reach = append(doc.Reach, rule{ru.From, ru.To})
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
