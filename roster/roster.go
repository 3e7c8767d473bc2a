package roster

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
)

// Roster is a parsed, validated roster.yaml.
type Roster struct {
	Path      string // absolute path of the file
	Dir       string // its directory
	Formation string
	Entry     string   // "" when not set; else must name a member
	Members   []Member // roster order
	Reach     []Rule
	Store     StoreSettings // the store: block; zero fields are not set
}

// Member is one entry of members: in roster.yaml, with its defaults filled in.
type Member struct {
	Name    string
	Capsule string // absolute capsule directory (resolved relative to the roster's dir)
	Listen  string // host:port where the door listens
	URL     string // how peers reach the door, without a trailing slash
	Line    int    // line of the member entry in the file
	// Store is the member's task store when it is not the embedded SQLite file: a postgres:// URL
	// (DESIGN §16), never with a password in it; "" for SQLite.
	Store string
	// StorePassword is where the store's password comes from, env:NAME or file:PATH, as a driver's
	// credential; "" leaves it to PostgreSQL's own PGPASSWORD and ~/.pgpass.
	StorePassword string
	// Replicas is how many processes run the member, sharing its tasks through its PostgreSQL store
	// (DESIGN §16); 0 when the roster does not say, which is 1.
	Replicas int
}

// MaxReplicas bounds a member's replicas: key.
const MaxReplicas = 64

// ReplicaCount is how many processes run the member: Replicas, at least 1.
func (m Member) ReplicaCount() int { return max(m.Replicas, 1) }

// Rule is one entry of reach: From may call every member in To; "*" in To means every other member.
type Rule struct {
	From string
	To   []string
	Line int
}

// Load reads the roster.yaml at path and parses it with Parse.
func Load(path string) (*Roster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read roster %s: %w", path, err)
	}
	return Parse(path, data)
}

// Member returns the member called name.
func (r *Roster) Member(name string) (Member, bool) {
	for _, m := range r.Members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// Names returns the members' names in roster order.
func (r *Roster) Names() []string {
	out := make([]string, len(r.Members))
	for i, m := range r.Members {
		out[i] = m.Name
	}
	return out
}

// Reachable returns the members from may call, in roster order (not rule order), each once, never from
// itself. It returns nil for a member no rule lets call anyone, and for a name that is no member.
func (r *Roster) Reachable(from string) []string {
	if _, ok := r.Member(from); !ok {
		return nil
	}
	all := false
	named := map[string]bool{}
	for _, rule := range r.Reach {
		if rule.From != from {
			continue
		}
		for _, to := range rule.To {
			if to == "*" {
				all = true
			}
			named[to] = true
		}
	}
	var out []string
	for _, m := range r.Members {
		if m.Name != from && (all || named[m.Name]) {
			out = append(out, m.Name)
		}
	}
	return out
}

// WithURLs returns a copy of r in which each member named in urls is reached at that URL instead of its
// url: (as in a container formation, where members reach each other by service name). Every name must
// be a member, every URL an http:// or https:// URL with a host and no user, query or fragment, and no
// two members may end up reached at the same URL.
func (r *Roster) WithURLs(urls map[string]string) (*Roster, error) {
	out := *r
	out.Members = slices.Clone(r.Members)
	for _, name := range slices.Sorted(maps.Keys(urls)) {
		i := slices.IndexFunc(out.Members, func(m Member) bool { return m.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("%s is no member of %s; the members are %s", name, r.Path, strings.Join(r.Names(), ", "))
		}
		u, err := doorURL(urls[name])
		if err != nil {
			return nil, fmt.Errorf("url %q of member %s %w", urls[name], name, err)
		}
		out.Members[i].URL = u
	}
	seen := map[string]string{}
	for _, m := range out.Members {
		if other, dup := seen[m.URL]; dup {
			return nil, fmt.Errorf("members %s and %s would both be reached at %s; give each member a door of its own", other, m.Name, m.URL)
		}
		seen[m.URL] = m.Name
	}
	return &out, nil
}

// The ways a door URL can be wrong.
var (
	errNotHTTP   = errors.New("is not an http:// or https:// URL with a host")
	errURLExtras = errors.New("has a user, query or fragment")
)

// doorURL checks raw as the URL of a door and returns it without a trailing slash.
func doorURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "":
		return "", errNotHTTP
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", errURLExtras
	}
	return strings.TrimRight(raw, "/"), nil
}

// MayCall reports whether the roster lets from call to. A member never calls itself.
func (r *Roster) MayCall(from, to string) bool {
	return slices.Contains(r.Reachable(from), to)
}
