package artifact

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/murmur-run/murmur/runtimetools"
)

// Pull installs the artifact value names (scope/name or scope/name@version) into the session: the
// checks of SPEC in its order (the grant by name; the copy found, its digest and WIT level; the grant by
// tier; the payload; a tool name another artifact holds; the pin), then the copy into the runtime
// directory and the allowlist. Without a version, a name murmur.lock pins is pulled at the pinned
// version. A refusal is a *Refusal (or a *ConflictError, or a *ReservedError inside a not-granted
// *Refusal), and writes nothing.
func (in *Installer) Pull(ctx context.Context, value string) (runtimetools.Pulled, error) {
	ref, err := in.cfg.Grant.CheckName(value)
	if err != nil {
		return runtimetools.Pulled{}, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	lock, err := ReadLock(in.cfg.LockPath)
	if err != nil {
		return runtimetools.Pulled{}, &Refusal{Kind: NotGranted, Err: err,
			Msg: fmt.Sprintf("nothing can be pinned while murmur.lock cannot be read; the operator must fix it first:\n%s", err)}
	}
	if pin, ok := lock.Get(ref.Name); ok && ref.Version == "" {
		ref.Version = pin.Version
	}
	f := *in.cfg.Finder
	f.Owners = lock.Owners
	found, notes, err := f.Find(ctx, ref)
	if err != nil {
		return runtimetools.Pulled{}, err
	}
	// A fetched copy left in the temporary directory costs disk, not the pull; no one here reads a log.
	defer func() { _ = found.Close() }()
	a := found.Artifact
	if err := in.checkPull(ctx, a, lock); err != nil {
		return runtimetools.Pulled{}, err
	}
	final, err := in.place(ctx, a)
	if err != nil {
		return runtimetools.Pulled{}, err
	}
	if err := in.hold(a, final); err != nil {
		return runtimetools.Pulled{}, err
	}
	m := a.Manifest
	return runtimetools.Pulled{Artifact: string(m.Name), Version: m.Version, Runtime: string(m.Runtime),
		ToolName: m.Name.Tool(), FetchedFrom: string(a.Place), Digest: a.Digest, Notes: notes}, nil
}

// checkPull makes the checks of a pull that follow the find: the grant by tier, a tool name another
// artifact holds, the payload (cfg.Check), and the pin against lock.
func (in *Installer) checkPull(ctx context.Context, a *Artifact, lock *Lock) error {
	m := a.Manifest
	if err := in.cfg.Grant.CheckRuntime(m.Runtime, m.Name); err != nil {
		return err
	}
	tool := m.Name.Tool()
	if held, ok := in.cfg.Allowlist.Lookup(tool); ok && held != m.Name {
		return refuse(NotGranted, "the tool name %s is already held by %s, another artifact of this session; %s cannot be added beside it", tool, held, m.Name)
	}
	if h, ok := in.held[tool]; ok && h.Artifact.Manifest.Name != m.Name {
		return refuse(NotGranted, "the tool name %s is already held by %s, another artifact of this session; %s cannot be added beside it", tool, h.Artifact.Manifest.Name, m.Name)
	}
	if m.Runtime == RuntimeTool && in.cfg.Check != nil {
		if err := in.cfg.Check(ctx, a); err != nil {
			return &Refusal{Kind: NotGranted, Err: err,
				Msg: fmt.Sprintf("%s@%s is a tool whose module cannot run: %v", m.Name, m.Version, err)}
		}
	}
	return lock.Verify(a.Pin(OriginAgent))
}

// place copies the artifact into the runtime directory and pins it, and returns where it now is. It
// copies first, to a temporary directory beside its place; pins; then moves the copy into place. A
// refusal of the pin removes the copy, so a refusal writes nothing.
func (in *Installer) place(ctx context.Context, a *Artifact) (string, error) {
	m := a.Manifest
	dir := in.cfg.ToolsDir
	if m.Runtime == RuntimeSkill {
		dir = in.cfg.SkillsDir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("preparing %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(dir, "."+m.Name.Tool()+".pull-")
	if err != nil {
		return "", fmt.Errorf("preparing the copy of %s: %w", m.Name, err)
	}
	// Gone once renamed into place; on a failure, a hidden leftover whose error the one returned outranks.
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := copyTree(a.Dir, tmp); err != nil {
		return "", fmt.Errorf("copying %s: %w", m.Name, err)
	}
	copied, err := LoadDir(tmp, a.Ref())
	if err != nil || copied.Digest != a.Digest {
		return "", &Refusal{Kind: NotFound, Err: err,
			Msg: fmt.Sprintf("the copy of %s@%s changed while it was pulled; pull it again", m.Name, m.Version)}
	}
	if err := in.pin(ctx, a); err != nil {
		return "", err
	}
	final := filepath.Join(dir, m.Name.Tool())
	if err := os.RemoveAll(final); err != nil {
		return "", fmt.Errorf("installing %s: replacing %s: %w", m.Name, final, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("installing %s: %w", m.Name, err)
	}
	return final, nil
}

// pin adds the artifact's pin to murmur.lock. A conflict with the pin there is a *ConflictError; an
// owner's refusal, a not-fetched *Refusal with its code; any other error a not-granted *Refusal.
func (in *Installer) pin(ctx context.Context, a *Artifact) error {
	pin := a.Pin(OriginAgent)
	err := UpdateLock(ctx, in.cfg.LockPath, func(l *Lock) error { return l.Add(pin) })
	if err == nil {
		return nil
	}
	var ce *ConflictError
	var oe *OwnerError
	switch {
	case errors.As(err, &ce):
		return err
	case errors.As(err, &oe):
		return &Refusal{Kind: NotFetched, Code: CodeOwner, Err: err, Msg: trimCode(oe.Error(), CodeOwner)}
	}
	m := a.Manifest
	return &Refusal{Kind: NotGranted, Err: err,
		Msg: fmt.Sprintf("%s@%s could not be pinned in murmur.lock: %v", m.Name, m.Version, err)}
}

// hold makes the artifact placed at final the session's: a skill's text is read, a tool joins the
// allowlist; and the change is remembered for Changes.
func (in *Installer) hold(a *Artifact, final string) error {
	m := a.Manifest
	tool := m.Name.Tool()
	placed := *a
	placed.Dir = final
	inst := Installed{Artifact: &placed}
	if m.Runtime == RuntimeSkill {
		s, err := ReadSkill(&placed, OriginAgent)
		if err != nil {
			return err
		}
		inst.Skill = &s
	} else if err := in.cfg.Allowlist.Add(m.Name); err != nil {
		return err
	}
	in.held[tool] = inst
	delete(in.removed, tool)
	in.added = append(in.added, tool)
	return nil
}

// trimCode drops the "code: " an error's text starts with, which the refusal carries as its code.
func trimCode(s, code string) string {
	if len(s) > len(code)+2 && s[:len(code)+2] == code+": " {
		return s[len(code)+2:]
	}
	return s
}
