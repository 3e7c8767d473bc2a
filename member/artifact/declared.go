package artifact

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// The staging codes of declared artifacts (DESIGN §7), besides E-CAP-013 and E-WIT-LEVEL-001.
const (
	CodeDeclared     = "E-ART-001" // a declared artifact cannot be used: not held, broken, of another role
	CodeLockConflict = "E-ART-002" // murmur.lock pins a declared artifact at another version or digest
	CodeLockInvalid  = "E-ART-003" // murmur.lock cannot be read or parsed
)

// Declared is what a capsule's murmur.yaml declares: entries as written, scope/name or
// scope/name@version.
type Declared struct {
	Tools  []string
	Skills []string
	Hooks  []string
}

// DeclaredError is one problem with a declared artifact: Error() is "CODE: murmur.yaml's KEY: …".
type DeclaredError struct {
	Code string
	Key  string // tools[0], hooks[1], …; "" for murmur.lock itself
	Err  error
}

func (e *DeclaredError) Error() string {
	msg := e.Err.Error()
	if c := e.Code + ": "; strings.HasPrefix(msg, c) {
		msg = msg[len(c):]
	}
	if e.Key == "" {
		return e.Code + ": " + msg
	}
	return e.Code + ": " + e.Key + ": " + msg
}

func (e *DeclaredError) Unwrap() error { return e.Err }

type declaredEntry struct {
	key  string
	text string
	role Runtime
}

func (d Declared) entries() []declaredEntry {
	var out []declaredEntry
	for _, l := range []struct {
		key  string
		list []string
		role Runtime
	}{{"tools", d.Tools, RuntimeTool}, {"skills", d.Skills, RuntimeSkill}, {"hooks", d.Hooks, RuntimeHook}} {
		for i, s := range l.list {
			out = append(out, declaredEntry{fmt.Sprintf("%s[%d]", l.key, i), s, l.role})
		}
	}
	return out
}

// Names returns the full names d declares.
func (d Declared) Names() []Name {
	var out []Name
	for _, e := range d.entries() {
		if r, err := ParseRef(e.text); err == nil {
			out = append(out, r.Name)
		}
	}
	return out
}

// StageDeclared resolves and verifies the artifacts d declares, in the stores, against the murmur.lock
// at lockPath, as staging and mur check do: a reserved tool name is E-CAP-013 before anything is read;
// then each entry is found (a pin decides the version of an entry without one), its role checked
// against the key it is under, its WIT level, and its pin (a digest mismatch names both digests). With
// pin, every one is then pinned with origin operator in one change of murmur.lock. It returns the
// artifacts in declaration order (tools, skills, hooks) and every problem, each a *DeclaredError.
func StageDeclared(ctx context.Context, stores []Store, lockPath string, d Declared, pin bool) ([]*Artifact, error) {
	entries := d.entries()
	var errs []error
	for _, e := range entries {
		if err := CheckReserved(e.text); err != nil {
			errs = append(errs, &DeclaredError{Code: CodeReserved, Key: e.key, Err: err})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	lock, err := ReadLock(lockPath)
	if err != nil {
		return nil, &DeclaredError{Code: CodeLockInvalid, Err: err}
	}
	var out []*Artifact
	byTool := map[string]string{}
	for _, e := range entries {
		fail := func(code string, err error) { errs = append(errs, &DeclaredError{Code: code, Key: e.key, Err: err}) }
		ref, err := ParseRef(e.text)
		if err != nil {
			fail(CodeDeclared, err)
			continue
		}
		if first, ok := byTool[ref.Name.Tool()]; ok {
			fail(CodeDeclared, fmt.Errorf("%s has the tool name %s, as %s does; give each artifact its own", ref.Name, ref.Name.Tool(), first))
			continue
		}
		byTool[ref.Name.Tool()] = string(ref.Name)
		if p, ok := lock.Get(ref.Name); ok && ref.Version == "" {
			ref.Version = p.Version
		}
		a, _, err := Resolve(stores, ref)
		if err != nil {
			var r *Refusal
			switch {
			case errors.As(err, &r) && r.Kind == DoesNotFit:
				fail(CodeWITLevel, errors.New(r.Msg))
			case errors.As(err, &r):
				fail(CodeDeclared, errors.New(r.Msg))
			default:
				fail(CodeDeclared, err)
			}
			continue
		}
		if a.Manifest.Runtime != e.role {
			fail(CodeDeclared, fmt.Errorf("%s is a %s, and %s: lists only %ss; move it under the key of its role", a.Ref(), a.Manifest.Runtime, strings.SplitN(e.key, "[", 2)[0], e.role))
			continue
		}
		if err := lock.Verify(a.Pin(OriginOperator)); err != nil {
			fail(CodeLockConflict, err)
			continue
		}
		out = append(out, a)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if pin && !pinsAll(lock, out) {
		err := UpdateLock(ctx, lockPath, func(l *Lock) error {
			for _, a := range out {
				if err := l.Add(a.Pin(OriginOperator)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			var ce *ConflictError
			if errors.As(err, &ce) {
				return nil, &DeclaredError{Code: CodeLockConflict, Err: err}
			}
			return nil, &DeclaredError{Code: CodeLockInvalid, Err: err}
		}
	}
	return out, nil
}

// pinsAll reports whether l already pins every one of arts as the operator, at its version and digest:
// then staging has nothing to write, and a capsule on a read-only file system (a container's formation
// mount, mur export's ConfigMap) stages without touching murmur.lock or taking its flock.
func pinsAll(l *Lock, arts []*Artifact) bool {
	for _, a := range arts {
		if !l.PinsDeclared(a) {
			return false
		}
	}
	return true
}

// PinsDeclared reports whether l pins a as staging pins a declared artifact: as the operator's, at its
// version and digest.
func (l *Lock) PinsDeclared(a *Artifact) bool {
	p, ok := l.Get(a.Manifest.Name)
	return ok && p.Version == a.Manifest.Version && p.Digest == a.Digest && p.Origin == OriginOperator
}
