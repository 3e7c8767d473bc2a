package roster

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

const (
	capsuleFile      = "murmur.yaml"
	firstDefaultPort = 7101
	defaultHost      = "127.0.0.1"
)

var (
	namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	yamlLine    = regexp.MustCompile(`^line (\d+): (.*)$`)

	topKeys    = []string{"formation", "entry", "members", "reach", "store"}
	memberKeys = []string{"name", "capsule", "listen", "url", "store", "store_password", "replicas"}
	ruleKeys   = []string{"from", "to"}
)

const exampleRoster = "formation: NAME, then members: with one entry per member (- name: NAME with capsule: DIR under it)"

// Parse validates data as the roster.yaml at path and returns the roster with its defaults filled in.
// path names the file in error messages as given; relative capsule directories are resolved against
// its directory. Every problem found is reported: see Error.
func Parse(path string, data []byte) (*Roster, error) {
	if path == "" {
		path = "roster.yaml"
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("roster %s: %w", path, err)
	}
	p := &parser{file: path, dir: filepath.Dir(abs)}
	r := &Roster{Path: abs, Dir: p.dir}
	if root := p.root(data); root != nil {
		p.roster(root, r)
	}
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return r, nil
}

// parser collects the problems of one file.
type parser struct {
	file string
	dir  string
	errs []*Error
}

func (p *parser) add(line int, msg, fix string) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: msg, Fix: fix})
}

// root decodes data and returns its top-level mapping, or nil after recording why there is none.
func (p *parser) root(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(0, "the file is empty", "write "+exampleRoster)
		} else {
			p.syntax(data, err)
		}
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		p.add(next.Line, "a second YAML document starts here", "keep one roster per file: remove this --- and what follows it")
	case !errors.Is(err, io.EOF):
		p.syntax(data, err)
		return nil
	}
	if len(doc.Content) == 0 || yamldoc.IsNull(yamldoc.Deref(doc.Content[0])) {
		p.add(0, "the file is empty", "write "+exampleRoster)
		return nil
	}
	n := yamldoc.Deref(doc.Content[0])
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, "the file must be a mapping of keys, not "+yamldoc.Describe(n), "write "+exampleRoster)
		return nil
	}
	return n
}

// syntax records a YAML syntax error of data at the line where it is.
func (p *parser) syntax(data []byte, err error) {
	line, msg := 0, strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		line = yamldoc.ProblemLine(data, line)
	}
	p.add(line, "not valid YAML: "+msg,
		`fix the syntax there: indent with spaces, not tabs, and quote text that holds ": " or starts with * & ! | > % @ (write "*" as to: ["*"])`)
}

// field is one key of a mapping with its value.
type field struct{ key, val *yaml.Node }

// fields returns the known keys of the mapping n, reporting unknown and repeated keys. where says which
// mapping it is, for messages ("at the top level", "in member lead").
func (p *parser) fields(n *yaml.Node, where string, known []string) map[string]field {
	out := map[string]field{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamldoc.Deref(n.Content[i]), yamldoc.Deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			p.add(k.Line, fmt.Sprintf("a key %s is %s", where, yamldoc.Describe(k)), "write plain names as keys; known keys: "+strings.Join(known, ", "))
			continue
		}
		if !slices.Contains(known, k.Value) {
			fix := "known keys: " + strings.Join(known, ", ")
			if s, ok := closest(k.Value, known); ok {
				fix = fmt.Sprintf("did you mean %q? %s", s, fix)
			}
			p.add(k.Line, fmt.Sprintf("unknown key %q %s", k.Value, where), fix)
			continue
		}
		if first, dup := out[k.Value]; dup {
			p.add(k.Line, fmt.Sprintf("key %q appears twice %s (first at line %d)", k.Value, where, first.key.Line), "keep one of them")
			continue
		}
		out[k.Value] = field{k, v}
	}
	return out
}

// text reads f's value as one scalar. what names it in messages ("capsule of member lead"); example is
// a line that would be right ("capsule: ./lead"); optional keys are told they may be removed.
func (p *parser) text(f field, what, example string, optional bool) (string, bool) {
	fix := "write " + example
	if optional {
		fix += ", or remove the key"
	}
	switch {
	case yamldoc.IsNull(f.val):
		p.add(f.key.Line, what+" has no value", fix)
		return "", false
	case f.val.Kind != yaml.ScalarNode:
		p.add(f.key.Line, fmt.Sprintf("%s must be a single value, not %s", what, yamldoc.Describe(f.val)), fix)
		return "", false
	case f.val.Value == "":
		p.add(f.key.Line, what+" is empty", fix)
		return "", false
	}
	return f.val.Value, true
}

// members is what the parser knows of the members while it checks the rest of the file.
type members struct {
	names []string       // every name given, valid or not, in roster order
	line  map[string]int // the line of each name's first use
}

func (ms *members) has(name string) bool { _, ok := ms.line[name]; return ok }

// unknown returns the fix for a name that is no member: the closest member's name, or the list of them.
func (ms *members) unknown(name string) string {
	if s, ok := closest(name, ms.names); ok {
		return fmt.Sprintf("did you mean %q?", s)
	}
	if len(ms.names) == 0 {
		return "name a member listed under members:"
	}
	return "the members are " + strings.Join(ms.names, ", ")
}

func (p *parser) roster(root *yaml.Node, r *Roster) {
	top := p.fields(root, "at the top level", topKeys)

	if f, ok := top["formation"]; ok {
		r.Formation, _ = p.text(f, "formation", "the formation's name, such as formation: hello", false)
	} else {
		p.add(root.Line, "formation is missing", "add the formation's name at the top level, such as formation: hello")
	}

	ms := &members{line: map[string]int{}}
	if f, ok := top["members"]; ok {
		r.Members = p.members(f, ms)
	} else {
		p.add(root.Line, "members is missing", "add members: with one entry per member, such as members: [{name: lead, capsule: ./lead}]")
	}

	if f, ok := top["entry"]; ok {
		if name, ok := p.text(f, "entry", "the name of the member the operator talks to, such as entry: lead", true); ok {
			if !ms.has(name) {
				p.add(f.key.Line, fmt.Sprintf("entry %q is no member", name), ms.unknown(name))
			}
			r.Entry = name
		}
	}

	if f, ok := top["reach"]; ok {
		r.Reach = p.reach(f, ms)
	}

	if f, ok := top["store"]; ok {
		r.Store = p.store(f)
	}
}

// slot is a member's parsed listen address.
type slot struct {
	host     string
	port     int
	explicit bool
}

func (p *parser) members(f field, ms *members) []Member {
	if yamldoc.IsNull(f.val) || f.val.Kind == yaml.SequenceNode && len(f.val.Content) == 0 {
		p.add(f.key.Line, "members lists no member", "add at least one, such as members: [{name: lead, capsule: ./lead}]")
		return nil
	}
	if f.val.Kind != yaml.SequenceNode {
		p.add(f.key.Line, "members must be a list, not "+yamldoc.Describe(f.val),
			`write one entry per member under members:, each "- name: NAME" with "capsule: DIR" indented under it`)
		return nil
	}
	var out []Member
	var slots []slot
	var listenLines, urlLines []int
	for i, item := range f.val.Content {
		if item.Kind == yaml.AliasNode {
			p.add(item.Line, fmt.Sprintf("member %d is the alias *%s of another entry", i+1, item.Value),
				"write each member out in full: every member needs a name and a door of its own")
			continue
		}
		item = yamldoc.Deref(item)
		if item.Kind != yaml.MappingNode {
			p.add(item.Line, fmt.Sprintf("member %d must be a mapping with name: and capsule:, not %s", i+1, yamldoc.Describe(item)),
				`write "- name: NAME" with "capsule: DIR" indented under it, or - {name: NAME, capsule: DIR}`)
			continue
		}
		m, s, lines := p.member(item, ms)
		out = append(out, m)
		slots = append(slots, s)
		listenLines = append(listenLines, lines[0])
		urlLines = append(urlLines, lines[1])
	}

	// Two doors cannot share an address; a wildcard host shares every address of its port.
	for i := range slots {
		if !slots[i].explicit {
			continue
		}
		for j := range i {
			// Port 0 asks the system for a free port, so any number of members may use it.
			if slots[j].explicit && slots[i].port != 0 && slots[i].port == slots[j].port && overlap(slots[i].host, slots[j].host) {
				p.add(listenLines[i], fmt.Sprintf("listen %s of %s is already used by %s (line %d)",
					out[i].Listen, label(out[i].Name), label(out[j].Name), listenLines[j]),
					"give each member its own port, or remove listen: to get a free one")
				break
			}
		}
	}

	used := map[int]bool{}
	for _, s := range slots {
		if s.explicit {
			used[s.port] = true
		}
	}
	next := firstDefaultPort
	for i := range out {
		if out[i].Listen != "" {
			continue
		}
		for used[next] {
			next++
		}
		used[next] = true
		out[i].Listen = net.JoinHostPort(defaultHost, strconv.Itoa(next))
		slots[i] = slot{host: defaultHost, port: next}
	}

	seenURL := map[string]int{}
	for i := range out {
		if out[i].URL == "" && slots[i].port != 0 {
			host := slots[i].host
			if isWildcard(host) {
				host = defaultHost
			}
			out[i].URL = "http://" + net.JoinHostPort(host, strconv.Itoa(slots[i].port))
		}
		if out[i].URL == "" {
			continue
		}
		// Derived URLs collide only where listen addresses do, which is reported above.
		if j, dup := seenURL[out[i].URL]; dup && (urlLines[i] != 0 || urlLines[j] != 0) {
			line := urlLines[i]
			if line == 0 {
				line = out[i].Line
			}
			p.add(line, fmt.Sprintf("%s is reached at %s, as %s is (line %d)", label(out[i].Name), out[i].URL, label(out[j].Name), out[j].Line),
				"give each member a door of its own: a different url:, or a different listen: port")
			continue
		}
		seenURL[out[i].URL] = i
	}
	return out
}

// member checks one entry of members. It returns the member, its listen address, and the lines of its
// listen: and url: keys (0 when absent).
func (p *parser) member(item *yaml.Node, ms *members) (Member, slot, [2]int) {
	m := Member{Line: item.Line}
	var s slot
	var lines [2]int
	f := p.fields(item, "in "+label(peekName(item)), memberKeys)

	if nf, ok := f["name"]; !ok {
		p.add(item.Line, "this member has no name", "add one, such as name: worker (lowercase letters, digits and -, starting with a letter)")
	} else if name, ok := p.text(nf, "the member's name", "name: worker", false); ok {
		m.Name = name
		if !namePattern.MatchString(name) {
			p.add(nf.key.Line, fmt.Sprintf("member name %q is not a valid name", name),
				fmt.Sprintf("use lowercase letters, digits and -, starting with a letter, such as name: %s", fixName(name)))
		}
		if first, dup := ms.line[name]; dup {
			p.add(nf.key.Line, fmt.Sprintf("member name %q is used twice (first at line %d)", name, first), "give each member a name of its own")
		} else {
			ms.line[name] = nf.key.Line
			ms.names = append(ms.names, name)
		}
	}
	who := label(m.Name)

	if cf, ok := f["capsule"]; !ok {
		p.add(item.Line, who+" has no capsule",
			"add the capsule directory, relative to the roster's directory, such as capsule: ./"+cmp.Or(m.Name, "worker"))
	} else if dir, ok := p.text(cf, "capsule of "+who, "the capsule directory, such as capsule: ./"+cmp.Or(m.Name, "worker"), false); ok {
		m.Capsule = p.capsule(cf.key.Line, who, dir)
	}

	if lf, ok := f["listen"]; ok {
		lines[0] = lf.key.Line
		if addr, ok := p.text(lf, "listen of "+who, "listen: 127.0.0.1:7101", true); ok {
			if host, port, ok := p.listen(lf.key.Line, who, addr); ok {
				m.Listen = net.JoinHostPort(host, strconv.Itoa(port))
				s = slot{host: host, port: port, explicit: true}
			}
		}
	}

	if uf, ok := f["url"]; ok {
		lines[1] = uf.key.Line
		if raw, ok := p.text(uf, "url of "+who, "url: http://127.0.0.1:7101", true); ok {
			u, err := doorURL(raw)
			switch {
			case errors.Is(err, errNotHTTP):
				p.add(uf.key.Line, fmt.Sprintf("url %q of %s %v", raw, who, err),
					"write how peers reach the door, such as url: http://127.0.0.1:7101, or remove the key to derive it from listen")
			case err != nil:
				p.add(uf.key.Line, fmt.Sprintf("url %q of %s %v", raw, who, err),
					"write only scheme, host, port and path, such as url: http://127.0.0.1:7101")
			default:
				m.URL = u
			}
		}
	}
	if sf, ok := f["store"]; ok {
		if raw, ok := p.text(sf, "store of "+who, "store: postgres://murmur@db:5432/murmur", true); ok {
			if err := CheckStoreURL(raw); err != nil {
				p.add(sf.key.Line, fmt.Sprintf("store of %s: %v", who, err),
					"write a PostgreSQL URL without its password, such as store: postgres://murmur@db:5432/murmur, and the password as store_password: env:NAME")
			} else {
				m.Store = raw
			}
		}
	}
	if pf, ok := f["store_password"]; ok {
		if ref, ok := p.text(pf, "store_password of "+who, "store_password: env:MUR_PG_PASSWORD", true); ok {
			switch {
			case !strings.HasPrefix(ref, "env:") && !strings.HasPrefix(ref, "file:"):
				p.add(pf.key.Line, fmt.Sprintf("store_password of %s must say where the password is, not be it", who),
					"write store_password: env:NAME (an environment variable) or store_password: file:PATH (a file holding it)")
			case len(ref) == len("env:") || len(ref) == len("file:"):
				p.add(pf.key.Line, fmt.Sprintf("store_password of %s names no variable or file", who), "write store_password: env:MUR_PG_PASSWORD")
			default:
				m.StorePassword = ref
			}
			if _, has := f["store"]; !has {
				p.add(pf.key.Line, fmt.Sprintf("store_password of %s has no store: to be the password of", who),
					"add store: postgres://USER@HOST:5432/DB, or remove store_password")
			}
		}
	}
	if rf, ok := f["replicas"]; ok {
		if raw, ok := p.text(rf, "replicas of "+who, "replicas: 3", true); ok {
			if n, err := strconv.Atoi(raw); err != nil || n < 1 || n > MaxReplicas {
				p.add(rf.key.Line, fmt.Sprintf("replicas of %s is %q, not a whole number from 1 to %d", who, raw, MaxReplicas),
					"write how many processes run the member, such as replicas: 3 (they share its tasks through its store: postgres://…)")
			} else {
				m.Replicas = n
			}
		}
	}
	return m, s, lines
}

// CheckStoreURL says what is wrong with a member's store URL (roster.yaml's store:, MUR_STORE): it must
// be a postgres:// (or postgresql://) URL naming a host, with no password in it, since the file and the
// environment it is written in are read by others; store_password: says where the password is.
func CheckStoreURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL: %v", raw, err)
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		return fmt.Errorf("%q is not a postgres:// URL; the embedded SQLite store needs no store: key", raw)
	case u.Host == "" && u.Query().Get("host") == "":
		return fmt.Errorf("%q names no host", raw)
	}
	if _, set := u.User.Password(); set {
		return errors.New("the URL holds a password, which would then be readable by everyone who reads roster.yaml")
	}
	if u.Query().Has("password") {
		return errors.New("the URL holds a password (its password= parameter), which would then be readable by everyone who reads roster.yaml")
	}
	return nil
}

// capsule resolves dir against the roster's directory and checks that it is a capsule directory.
func (p *parser) capsule(line int, who, dir string) string {
	abs := dir
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(p.dir, dir)
	}
	abs = filepath.Clean(abs)
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.add(line, fmt.Sprintf("capsule %q of %s does not exist (looked for %s)", dir, who, abs),
			"create that directory with a murmur.yaml in it, or fix the path: it is relative to "+p.dir)
		return abs
	case err != nil:
		p.add(line, fmt.Sprintf("capsule %q of %s cannot be read: %v", dir, who, err), "make "+abs+" readable")
		return abs
	case !fi.IsDir():
		p.add(line, fmt.Sprintf("capsule %q of %s is a file, not a directory (%s)", dir, who, abs),
			"name the directory that holds the capsule's murmur.yaml")
		return abs
	}
	file := filepath.Join(abs, capsuleFile)
	if fi, err := os.Stat(file); err != nil || fi.IsDir() {
		p.add(line, fmt.Sprintf("capsule %q of %s has no %s (looked for %s)", dir, who, capsuleFile, file),
			"write the capsule's murmur.yaml there, or point capsule: at the directory that holds it")
	}
	return abs
}

// listen checks a listen address; the host may be empty (every interface), an IP address or a host name.
func (p *parser) listen(line int, who, addr string) (string, int, bool) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		p.add(line, fmt.Sprintf("listen %q of %s is not host:port", addr, who),
			"write the door's address with its port, such as listen: 127.0.0.1:7101 (or [::1]:7101), or remove the key for a default")
		return "", 0, false
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		p.add(line, fmt.Sprintf("listen %q of %s has a bad port %q", addr, who, portText),
			"write a port from 1 to 65535, such as listen: 127.0.0.1:7101 (or 0 for one the system picks)")
		return "", 0, false
	}
	if !validHost(host) {
		p.add(line, fmt.Sprintf("listen %q of %s has a bad host %q", addr, who, host),
			"write an IP address or a host name, such as listen: 127.0.0.1:7101")
		return "", 0, false
	}
	return host, port, true
}

func (p *parser) reach(f field, ms *members) []Rule {
	if yamldoc.IsNull(f.val) {
		return nil // every rule commented out: nobody calls anybody
	}
	if f.val.Kind != yaml.SequenceNode {
		p.add(f.key.Line, "reach must be a list of rules, not "+yamldoc.Describe(f.val),
			`write one rule per caller under reach:, each "- from: MEMBER" with "to: [MEMBER, ...]" under it`)
		return nil
	}
	var out []Rule
	for i, item := range f.val.Content {
		item = yamldoc.Deref(item)
		if item.Kind != yaml.MappingNode {
			p.add(item.Line, fmt.Sprintf("reach rule %d must be a mapping with from: and to:, not %s", i+1, yamldoc.Describe(item)),
				"write - {from: MEMBER, to: [MEMBER, ...]}")
			continue
		}
		out = append(out, p.rule(item, ms))
	}
	return out
}

func (p *parser) rule(item *yaml.Node, ms *members) Rule {
	rule := Rule{Line: item.Line}
	where := "in this reach rule"
	if name := peekScalar(item, "from"); name != "" {
		where = "in the reach rule from " + name
	}
	f := p.fields(item, where, ruleKeys)

	fromOK := false
	if ff, ok := f["from"]; !ok {
		p.add(item.Line, "this reach rule has no from", "add the calling member, such as from: "+cmp.Or(first(ms.names), "lead"))
	} else if name, ok := p.text(ff, "from of this reach rule", "the calling member, such as from: "+cmp.Or(first(ms.names), "lead"), false); ok {
		rule.From = name
		switch {
		case name == "*":
			p.add(ff.key.Line, `from: "*" is not a member`, "write one rule per calling member, such as from: "+cmp.Or(first(ms.names), "lead"))
		case !ms.has(name):
			p.add(ff.key.Line, fmt.Sprintf("from %q of this reach rule is no member", name), ms.unknown(name))
		default:
			fromOK = true
		}
	}
	caller := cmp.Or(rule.From, "this member")
	ruleName := "this reach rule"
	if rule.From != "" {
		ruleName = "the reach rule from " + rule.From
	}
	example := fmt.Sprintf("name the members %s may call, such as to: [%s], or to: [\"*\"] for every other member", caller, exampleCallee(ms.names, rule.From))

	tf, ok := f["to"]
	switch {
	case !ok:
		p.add(item.Line, ruleName+" has no to", example)
		return rule
	case yamldoc.IsNull(tf.val) || tf.val.Kind == yaml.SequenceNode && len(tf.val.Content) == 0:
		p.add(tf.key.Line, "to of "+ruleName+" is empty",
			fmt.Sprintf("name the members %s may call, such as to: [%s], or remove the rule", caller, exampleCallee(ms.names, rule.From)))
		return rule
	case tf.val.Kind != yaml.SequenceNode:
		fix := example
		if tf.val.Kind == yaml.ScalarNode {
			fix = fmt.Sprintf("write to: [%s]", tf.val.Value)
			if tf.val.Value == "*" {
				fix = `write to: ["*"]`
			}
		}
		p.add(tf.key.Line, fmt.Sprintf("to of %s must be a list, not %s", ruleName, yamldoc.Describe(tf.val)), fix)
		return rule
	}
	for _, n := range tf.val.Content {
		n = yamldoc.Deref(n)
		if n.Kind != yaml.ScalarNode || yamldoc.IsNull(n) || n.Value == "" {
			p.add(n.Line, fmt.Sprintf("an entry of to in %s is %s, not a member name", ruleName, yamldoc.Describe(n)), example)
			continue
		}
		name := n.Value
		rule.To = append(rule.To, name)
		switch {
		case name == "*":
		case fromOK && name == rule.From:
			p.add(n.Line, fmt.Sprintf("member %s reaches itself", name),
				fmt.Sprintf("remove %s from this to: list (a member never calls itself)", name))
		case !ms.has(name):
			p.add(n.Line, fmt.Sprintf("to %q of %s is no member", name, ruleName), ms.unknown(name))
		}
	}
	return rule
}

// label names a member in messages.
func label(name string) string {
	if name == "" || !namePattern.MatchString(name) {
		return "this member"
	}
	return "member " + name
}

// peekName returns the member entry's name, if it has a plain one, so that messages about its other keys
// can name it.
func peekName(item *yaml.Node) string { return peekScalar(item, "name") }

func peekScalar(item *yaml.Node, key string) string {
	for i := 0; i+1 < len(item.Content); i += 2 {
		if k, v := yamldoc.Deref(item.Content[i]), yamldoc.Deref(item.Content[i+1]); k.Value == key && v.Kind == yaml.ScalarNode && !yamldoc.IsNull(v) {
			return v.Value
		}
	}
	return ""
}

// fixName turns a bad member name into the closest good one, for the fix of the message about it.
func fixName(name string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9' && b.Len() > 0:
			b.WriteRune(c)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	s := strings.TrimRight(b.String(), "-")
	if s == "" {
		return "worker"
	}
	return s
}

func exampleCallee(names []string, from string) string {
	for _, n := range names {
		if n != from {
			return n
		}
	}
	return "worker"
}

func first(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// closest returns the option nearest to got within edit distance 2, if one is.
func closest(got string, options []string) (string, bool) {
	best := yamldoc.Closest(got, options)
	return best, best != ""
}

var hostPattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$`)

func validHost(host string) bool {
	if host == "" {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return hostPattern.MatchString(host)
}

func isWildcard(host string) bool {
	return host == "" || host == "0.0.0.0" || host == "::"
}

// overlap reports whether doors listening on the same port at hosts a and b would collide.
func overlap(a, b string) bool {
	if isWildcard(a) || isWildcard(b) {
		return true
	}
	return sameHost(canonicalHost(a), canonicalHost(b)) ||
		strings.EqualFold(a, "localhost") && b == defaultHost || strings.EqualFold(b, "localhost") && a == defaultHost
}
