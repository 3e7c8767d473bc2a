package artifact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
	"github.com/murmur-run/murmur/runtimetools"
)

// LockFile is the name of the lock file beside a capsule's murmur.yaml.
const LockFile = "murmur.lock"

// FlockFile is the hidden sibling of a capsule's murmur.lock that UpdateLock takes its flock on: it holds
// nothing, and a copy of the capsule leaves it out.
const FlockFile = "." + LockFile + ".lock"

// LockPath returns the murmur.lock of the capsule in dir.
func LockPath(dir string) string { return filepath.Join(dir, LockFile) }

// Origin says who pinned an artifact: the operator (murmur.yaml's tools:, mur pull) or the agent
// (pull-artifact). remove-artifact removes only the agent's pins.
type Origin string

// The origins.
const (
	OriginOperator Origin = "operator"
	OriginAgent    Origin = "agent"
)

// Pin is one entry of murmur.lock.
type Pin struct {
	Name    Name
	Version string
	Digest  string
	Origin  Origin
	Source  Place // project store, global store or github:<owner>/<repo>
	Owner   int64 // the GitHub owner id of a github: source; 0 for a store
}

// Lock is a capsule's murmur.lock: its pins, sorted by name, one per name, and per scope fetched from a
// GitHub source the owner id it was first fetched from. A Lock is not safe for concurrent use; UpdateLock
// serializes changes to the file.
type Lock struct {
	Pins   []Pin
	Owners map[string]int64 // scope -> GitHub owner id
	raw    []byte           // the file as read, to skip writing what did not change
}

// Get returns the pin of name.
func (l *Lock) Get(name Name) (Pin, bool) {
	i, ok := slices.BinarySearchFunc(l.Pins, name, func(p Pin, n Name) int { return cmpName(p.Name, n) })
	if !ok {
		return Pin{}, false
	}
	return l.Pins[i], true
}

func cmpName(a, b Name) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Add pins p. A pin of the same name, version and digest is already there (an operator's pin of it
// makes the pin the operator's); another version or digest is a *ConflictError; a reserved tool name is
// a *ReservedError (E-CAP-013); a github: source answering for another owner than the scope's recorded
// one is an *OwnerError (E-REG-010). On error l is unchanged.
func (l *Lock) Add(p Pin) error {
	if err := CheckReserved(string(p.Name)); err != nil {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	src, github := sourceOf(p.Source)
	if github {
		if err := l.CheckOwner(p.Name.Scope(), src, p.Owner); err != nil {
			return err
		}
	}
	i, found := slices.BinarySearchFunc(l.Pins, p.Name, func(q Pin, n Name) int { return cmpName(q.Name, n) })
	if found {
		old := l.Pins[i]
		if old.Version != p.Version || old.Digest != p.Digest {
			return &ConflictError{Pinned: old, Want: p}
		}
		if p.Origin == OriginOperator {
			l.Pins[i].Origin = OriginOperator
		}
		return nil
	}
	if github {
		if l.Owners == nil {
			l.Owners = map[string]int64{}
		}
		if _, ok := l.Owners[p.Name.Scope()]; !ok {
			l.Owners[p.Name.Scope()] = p.Owner
		}
	}
	l.Pins = slices.Insert(l.Pins, i, p)
	return nil
}

// Remove takes out the pin of name, reporting the pin removed. The scope's owner stays recorded: it is
// the owner the scope was first fetched from, whatever is pinned now.
func (l *Lock) Remove(name Name) (Pin, bool) {
	i, ok := slices.BinarySearchFunc(l.Pins, name, func(p Pin, n Name) int { return cmpName(p.Name, n) })
	if !ok {
		return Pin{}, false
	}
	p := l.Pins[i]
	l.Pins = slices.Delete(l.Pins, i, i+1)
	return p, true
}

// CheckOwner returns an *OwnerError (E-REG-010) when murmur.lock records an owner for scope other than
// owner, the one src answers for now.
func (l *Lock) CheckOwner(scope string, src Source, owner int64) error {
	if rec, ok := l.Owners[scope]; ok && rec != owner {
		return &OwnerError{Scope: scope, Source: src, Recorded: rec, Got: owner}
	}
	return nil
}

// check validates a pin about to be written.
func (p Pin) check() error {
	if _, err := ParseName(string(p.Name)); err != nil {
		return err
	}
	switch {
	case !ValidVersion(p.Version):
		return fmt.Errorf("pin %s: %q is not a version", p.Name, p.Version)
	case !ValidDigest(p.Digest):
		return fmt.Errorf("pin %s: %q is not a digest", p.Name, p.Digest)
	case p.Origin != OriginOperator && p.Origin != OriginAgent:
		return fmt.Errorf("pin %s: %q is not an origin", p.Name, p.Origin)
	}
	_, github := sourceOf(p.Source)
	switch {
	case github && p.Owner <= 0:
		return fmt.Errorf("pin %s: a pin fetched from %s needs the owner id it answered for", p.Name, p.Source)
	case !github && p.Source != ProjectStore && p.Source != GlobalStore:
		return fmt.Errorf("pin %s: %q is not a place", p.Name, p.Source)
	case !github && p.Owner != 0:
		return fmt.Errorf("pin %s: a pin from the %s has no owner", p.Name, p.Source)
	}
	return nil
}

// sourceOf parses a github: place.
func sourceOf(p Place) (Source, bool) {
	s, err := ParseSource(string(p))
	return s, err == nil
}

const lockHeader = "# murmur.lock: the artifacts this capsule is pinned to, written by mur (mur pull, pull-artifact,\n" +
	"# remove-artifact). Keep it with the capsule; edit it only to remove a pin or to trust a scope's new owner.\n"

type lockFileYAML struct {
	Pins   []pinYAML        `yaml:"pins"`
	Owners map[string]int64 `yaml:"owners,omitempty"`
}

type pinYAML struct {
	Name    string `yaml:"name"`
	Version string `yaml:"version"`
	Digest  string `yaml:"digest"`
	Origin  string `yaml:"origin"`
	Source  string `yaml:"source"`
	Owner   int64  `yaml:"owner,omitempty"`
}

// Marshal returns the file l is written as: the pins sorted by name, then the owners sorted by scope.
func (l *Lock) Marshal() []byte {
	f := lockFileYAML{Pins: []pinYAML{}, Owners: l.Owners}
	for _, p := range l.Pins {
		f.Pins = append(f.Pins, pinYAML{string(p.Name), p.Version, p.Digest, string(p.Origin), string(p.Source), p.Owner})
	}
	var b bytes.Buffer
	b.WriteString(lockHeader)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		panic(err) // plain strings and numbers always encode
	}
	if err := enc.Close(); err != nil {
		panic(err) // the end of the stream, into a bytes.Buffer: nothing can fail
	}
	return b.Bytes()
}

// ReadLock reads the murmur.lock at path; a missing file is an empty lock.
func ReadLock(path string) (*Lock, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Lock{}, nil
	}
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot be read: " + errText(err), Fix: "make the file readable"}
	}
	return ParseLock(path, data)
}

const lockExample = "pins: with one entry per pin ({name: local/tool-edit, version: 1.0.0, digest: sha256:…, origin: operator, source: project store})"

// ParseLock parses data as the murmur.lock at path, strictly: every problem is an *Error with its line
// and the fix, in line order; a pin whose tool name is reserved is refused with E-CAP-013.
func ParseLock(path string, data []byte) (*Lock, error) {
	d := &yamlDoc{Doc: yamldoc.Doc{File: path}}
	l := &Lock{raw: data}
	if len(bytes.TrimSpace(stripComments(data))) == 0 {
		return l, nil // a file emptied by hand holds no pins
	}
	root := d.Root(data, lockExample)
	if root == nil {
		return nil, d.Err()
	}
	seen := map[Name]int{}
	d.Fields(root, "", []yamldoc.Field{
		{Name: "pins", Fn: func(_, v *yaml.Node) {
			if !d.IsKind(v, yaml.SequenceNode, "pins") {
				return
			}
			for i, item := range yamldoc.Deref(v).Content {
				if p, ok := d.pin(item, fmt.Sprintf("pins[%d]", i)); ok {
					if first, dup := seen[p.Name]; dup {
						d.Add(item.Line, fmt.Sprintf("pins lists %s twice (first at line %d)", p.Name, first), "keep one pin per name")
						continue
					}
					seen[p.Name] = item.Line
					l.Pins = append(l.Pins, p)
				}
			}
		}},
		{Name: "owners", Fn: func(_, v *yaml.Node) {
			d.Walk(v, "owners", func(k, v *yaml.Node) {
				if !partRE.MatchString(k.Value) || len(k.Value) > maxPartLen {
					d.Add(k.Line, fmt.Sprintf("owners has %q, which is not a scope", k.Value), "write the scope, the part of a full name before /, such as acme: 4242")
					return
				}
				if id, ok := d.ownerID(v, "owners."+k.Value); ok {
					if l.Owners == nil {
						l.Owners = map[string]int64{}
					}
					l.Owners[k.Value] = id
				}
			})
		}},
	})
	if err := d.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(l.Pins, func(a, b Pin) int { return cmpName(a.Name, b.Name) })
	return l, nil
}

// stripComments drops whole-line comments, to tell a file of comments only from one with content.
func stripComments(data []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(data, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, t...)
		}
	}
	return out
}

// pin reads one entry of pins.
func (d *yamlDoc) pin(n *yaml.Node, path string) (Pin, bool) {
	var p Pin
	got := map[string]int{}
	ok := true
	bad := func(line int, msg, fix string) { d.Add(line, path+" "+msg, fix); ok = false }
	badName := func(line int, key string, err error) { d.addNameError(line, path+" "+key+" ", err); ok = false }
	text := func(key string, v *yaml.Node) (string, bool) {
		s, good := d.Text(v, path+"."+key)
		ok = ok && good
		return s, good
	}
	// textField reads a field whose value is text: its line goes into got, and check sees the text.
	textField := func(key string, check func(v *yaml.Node, s string)) yamldoc.Field {
		return yamldoc.Field{Name: key, Fn: func(k, v *yaml.Node) {
			got[key] = k.Line
			if s, good := text(key, v); good {
				check(v, s)
			}
		}}
	}
	var owner *yaml.Node
	if !d.Fields(n, path, []yamldoc.Field{
		textField("name", func(v *yaml.Node, s string) {
			if rerr := CheckReserved(s); rerr != nil {
				bad(v.Line, rerr.Error(), "remove this pin: a runtime-provided tool is never pinned")
			} else if name, err := ParseName(s); err != nil {
				badName(v.Line, "name", err)
			} else {
				p.Name = name
			}
		}),
		textField("version", func(v *yaml.Node, s string) {
			if err := checkVersion(s); err != nil {
				badName(v.Line, "version", err)
			} else {
				p.Version = s
			}
		}),
		textField("digest", func(v *yaml.Node, s string) {
			if !ValidDigest(s) {
				bad(v.Line, fmt.Sprintf("digest %q is not a digest", s), "write sha256: and 64 lowercase hex digits, as mur wrote it (mur pull pins it again)")
				return
			}
			p.Digest = s
		}),
		{Name: "origin", Fn: func(k, v *yaml.Node) {
			got["origin"] = k.Line
			if s, good := d.Enum(v, path+".origin", string(OriginOperator), string(OriginAgent)); good {
				p.Origin = Origin(s)
			} else {
				ok = false
			}
		}},
		textField("source", func(v *yaml.Node, s string) {
			if s != string(ProjectStore) && s != string(GlobalStore) {
				if _, err := ParseSource(s); err != nil {
					bad(v.Line, fmt.Sprintf("source %q is not a place", s), "write source: project store, source: global store or source: github:<owner>/<repo>")
					return
				}
			}
			p.Source = Place(s)
		}),
		{Name: "owner", Fn: func(k, v *yaml.Node) {
			got["owner"] = k.Line
			owner = v
		}},
	}) {
		return p, false
	}
	for _, key := range []string{"name", "version", "digest", "origin", "source"} {
		if _, has := got[key]; !has {
			d.Missing(n.Line, yamldoc.Join(path, key), path+" has no "+key, fmt.Sprintf("add %s:, or remove the pin and pin the artifact again with mur pull", key))
			ok = false
		}
	}
	_, github := sourceOf(p.Source)
	switch {
	case owner != nil && p.Source != "" && !github:
		bad(got["owner"], fmt.Sprintf("has an owner, but owner is for pins fetched from a github: source, not the %s", p.Source), "remove owner")
	case owner != nil:
		p.Owner, _ = d.ownerID(owner, path+".owner")
	case github:
		bad(n.Line, "was fetched from "+string(p.Source)+" but has no owner", "add owner: with the GitHub owner id it was fetched from, or remove the pin and pull it again")
	}
	return p, ok
}

// ownerID reads a GitHub owner id: a whole number of 1 or more.
func (d *yamlDoc) ownerID(v *yaml.Node, path string) (int64, bool) {
	n, ok := d.Count(v, path)
	if ok && n == 0 {
		d.Add(yamldoc.Deref(v).Line, path+" is 0, which is no GitHub owner id", "write the owner's id, such as "+yamldoc.LastKey(path)+": 4242")
		return 0, false
	}
	return n, ok
}

// WriteLock writes l to path atomically: a temporary file in the same directory, synced, then renamed
// over path, then the directory synced, so that path is always either the old file or the new one, whole.
// Use UpdateLock to change a lock other sessions may change too.
func WriteLock(path string, l *Lock) error {
	data := l.Marshal()
	if err := writeFileAtomic(path, data); err != nil {
		return err
	}
	l.raw = data
	return nil
}

// writeFileAtomic replaces path with data: temporary file, fsync, rename, fsync of the directory.
func writeFileAtomic(path string, data []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, tempPrefix(base)+"*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		_ = f.Close()      // already failing: the error returned says what went wrong
		_ = os.Remove(tmp) // cleanup on a failed path: the error returned is the one to report
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp) // cleanup on a failed path: the error returned is the one to report
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp) // cleanup on a failed path: the error returned is the one to report
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("writing %s: syncing its directory: %w", path, err)
	}
	return nil
}

// tempPrefix names the temporary files of base: hidden, and recognisably its own.
func tempPrefix(base string) string { return "." + base + ".tmp-" }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }() // a directory: Sync says whether its entries reached the disk
	return d.Sync()
}

// UpdateLock changes the murmur.lock at path under an exclusive lock on its sibling .murmur.lock.lock
// (flock), so that sessions and mur pull changing one lock at once each see the others' pins: it reads
// the file, hands it to fn, and writes it back atomically when fn returns nil and changed it. A file that
// cannot be read or parsed is returned as the error, and nothing is written: a hand-edited invalid lock
// is never replaced. Waiting for the flock ends with ctx.
func UpdateLock(ctx context.Context, path string, fn func(*Lock) error) error {
	unlock, err := flock(ctx, flockPath(path))
	if err != nil {
		return err
	}
	defer unlock()
	removeStaleTemps(path)
	l, err := ReadLock(path)
	if err != nil {
		return err
	}
	if err := fn(l); err != nil {
		return err
	}
	data := l.Marshal()
	if bytes.Equal(data, l.raw) {
		return nil
	}
	return writeFileAtomic(path, data)
}

// flockPath is the file UpdateLock locks: a hidden sibling, since the lock file itself is replaced by
// every write (a lock on it would be a lock on a file no longer there).
func flockPath(path string) string {
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+".lock")
}

// flock takes an exclusive flock on path (creating it), polling so that ctx can end the wait.
func flock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	wait := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			// The file holds nothing: it is there for its lock, which Close releases too.
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close() // already failing: the error returned says what went wrong
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			_ = f.Close() // already failing: the error returned says what went wrong
			return nil, fmt.Errorf("locking %s: %w", path, context.Cause(ctx))
		case <-t.C:
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// removeStaleTemps removes temporary files a writer killed mid-write left beside path. Only a holder of
// the flock calls it, and every writer holds the flock while its temporary file exists.
func removeStaleTemps(path string) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	stale, _ := filepath.Glob(filepath.Join(dir, tempPrefix(base)+"*"))
	for _, s := range stale {
		_ = os.Remove(s) // one left is tried again by the next update
	}
}

// reserved reports whether name's tool name is a reserved runtime-provided tool name.
func reserved(name string) bool { return runtimetools.Reserved(name) }

// Verify checks p, about to be used, against l without changing it: nil when l has no pin of p's name
// or pins the same version and digest, else a *ConflictError naming both digests. Staging checks every
// declared artifact with it.
func (l *Lock) Verify(p Pin) error {
	old, ok := l.Get(p.Name)
	if !ok || old.Version == p.Version && old.Digest == p.Digest {
		return nil
	}
	return &ConflictError{Pinned: old, Want: p}
}
