package roster

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// member checks one entry of members. It returns the member, its listen address, and the lines of its
// listen: and url: keys (0 when absent).
func (p *parser) member(item *yaml.Node, ms *members) (Member, slot, [2]int) {
	m := Member{Line: item.Line}
	var s slot
	var lines [2]int
	f := p.fields(item, "in "+label(peekName(item)), memberKeys)

	m.Name = p.memberName(item, f, ms)
	who := label(m.Name)

	if cf, ok := f["capsule"]; !ok {
		p.add(item.Line, who+" has no capsule",
			"add the capsule directory, relative to the roster's directory, such as capsule: ./"+cmp.Or(m.Name, "worker"))
	} else if dir, ok := p.text(cf, "capsule of "+who, "the capsule directory, such as capsule: ./"+cmp.Or(m.Name, "worker"), false); ok {
		m.Capsule = p.capsule(cf.key.Line, who, dir)
	}
	if lf, ok := f["listen"]; ok {
		lines[0] = lf.key.Line
		m.Listen, s = p.memberListen(lf, who)
	}
	if uf, ok := f["url"]; ok {
		lines[1] = uf.key.Line
		m.URL = p.memberURL(uf, who)
	}
	if sf, ok := f["store"]; ok {
		m.Store = p.memberStore(sf, who)
	}
	if pf, ok := f["store_password"]; ok {
		_, hasStore := f["store"]
		m.StorePassword = p.storePassword(pf, who, hasStore)
	}
	if rf, ok := f["replicas"]; ok {
		m.Replicas = p.replicas(rf, who)
	}
	return m, s, lines
}

// memberName checks the entry's name: and records it in ms; it returns the name, "" when there is none.
func (p *parser) memberName(item *yaml.Node, f map[string]field, ms *members) string {
	nf, ok := f["name"]
	if !ok {
		p.add(item.Line, "this member has no name", "add one, such as name: worker (lowercase letters, digits and -, starting with a letter)")
		return ""
	}
	name, ok := p.text(nf, "the member's name", "name: worker", false)
	if !ok {
		return ""
	}
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
	return name
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

// memberListen reads a member's listen: and returns it with its slot; "" and no slot when it is wrong.
func (p *parser) memberListen(lf field, who string) (string, slot) {
	addr, ok := p.text(lf, "listen of "+who, "listen: 127.0.0.1:7101", true)
	if !ok {
		return "", slot{}
	}
	host, port, ok := p.listen(lf.key.Line, who, addr)
	if !ok {
		return "", slot{}
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), slot{host: host, port: port, explicit: true}
}

// memberURL reads a member's url:, how peers reach its door; "" when it is wrong.
func (p *parser) memberURL(uf field, who string) string {
	raw, ok := p.text(uf, "url of "+who, "url: http://127.0.0.1:7101", true)
	if !ok {
		return ""
	}
	u, err := doorURL(raw)
	switch {
	case errors.Is(err, errNotHTTP):
		p.add(uf.key.Line, fmt.Sprintf("url %q of %s %v", raw, who, err),
			"write how peers reach the door, such as url: http://127.0.0.1:7101, or remove the key to derive it from listen")
	case err != nil:
		p.add(uf.key.Line, fmt.Sprintf("url %q of %s %v", raw, who, err),
			"write only scheme, host, port and path, such as url: http://127.0.0.1:7101")
	default:
		return u
	}
	return ""
}

// memberStore reads a member's store:, the URL of its PostgreSQL store; "" when it is wrong.
func (p *parser) memberStore(sf field, who string) string {
	raw, ok := p.text(sf, "store of "+who, "store: postgres://murmur@db:5432/murmur", true)
	if !ok {
		return ""
	}
	if err := CheckStoreURL(raw); err != nil {
		p.add(sf.key.Line, fmt.Sprintf("store of %s: %v", who, err),
			"write a PostgreSQL URL without its password, such as store: postgres://murmur@db:5432/murmur, and the password as store_password: env:NAME")
		return ""
	}
	return raw
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

// storePassword reads a member's store_password:, where the password of its store: is (hasStore says
// the member has one); "" when it is wrong.
func (p *parser) storePassword(pf field, who string, hasStore bool) string {
	ref, ok := p.text(pf, "store_password of "+who, "store_password: env:MUR_PG_PASSWORD", true)
	if !ok {
		return ""
	}
	var out string
	switch {
	case !strings.HasPrefix(ref, "env:") && !strings.HasPrefix(ref, "file:"):
		p.add(pf.key.Line, fmt.Sprintf("store_password of %s must say where the password is, not be it", who),
			"write store_password: env:NAME (an environment variable) or store_password: file:PATH (a file holding it)")
	case len(ref) == len("env:") || len(ref) == len("file:"):
		p.add(pf.key.Line, fmt.Sprintf("store_password of %s names no variable or file", who), "write store_password: env:MUR_PG_PASSWORD")
	default:
		out = ref
	}
	if !hasStore {
		p.add(pf.key.Line, fmt.Sprintf("store_password of %s has no store: to be the password of", who),
			"add store: postgres://USER@HOST:5432/DB, or remove store_password")
	}
	return out
}

// replicas reads a member's replicas:, how many processes run it; 0 when it is wrong.
func (p *parser) replicas(rf field, who string) int {
	raw, ok := p.text(rf, "replicas of "+who, "replicas: 3", true)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > MaxReplicas {
		p.add(rf.key.Line, fmt.Sprintf("replicas of %s is %q, not a whole number from 1 to %d", who, raw, MaxReplicas),
			"write how many processes run the member, such as replicas: 3 (they share its tasks through its store: postgres://…)")
		return 0
	}
	return n
}
