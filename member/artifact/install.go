package artifact

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/murmur-run/murmur/runtimetools"
)

// MaxListed bounds the matches one listing returns (SPEC: at most 50).
const MaxListed = 50

// InstallConfig is what an Installer works with: the session's places, its grant and its lists. Every
// path is absolute or relative to the process's working directory.
type InstallConfig struct {
	Grant    *Grant  // capabilities.install; nil: every pull and removal is refused not-granted
	Finder   *Finder // the stores and, with install.from: [stores, sources], the sources
	LockPath string  // the capsule's murmur.lock
	// ToolsDir is the runtime directory's tools/: a pulled tool is copied to ToolsDir/<tool name>/, and
	// removed from there. SkillsDir likewise holds pulled skills.
	ToolsDir  string
	SkillsDir string
	Allowlist *Allowlist // the session's dispatch allowlist: a pulled tool joins it, a removed one leaves
	// Declared are the artifacts murmur.yaml declares (tools:, hooks:): never removable.
	Declared []Name
	// Check, when set, checks a tool's payload can run before it is pinned (the session compiles its
	// module); an error refuses the pull not-granted, as a role that disagrees with its payload.
	Check func(ctx context.Context, a *Artifact) error
}

// Installed is an artifact the session holds that an agent pulled.
type Installed struct {
	Artifact *Artifact // Dir is where the session runs it from (under ToolsDir or SkillsDir)
	Skill    *Skill    // for a skill: its text, fenced as untrusted
}

// Installer answers pull-artifact and remove-artifact for one session: it checks, finds, pins, copies
// and lists, and remembers what changed until the session's next inference call collects it. It is safe
// for concurrent use; pulls and removals of one session run one at a time.
type Installer struct {
	cfg InstallConfig

	mu      sync.Mutex
	held    map[string]Installed // tool name -> what the agent pulled in this session
	removed map[string]Name      // tool name -> the artifact removed in this session
	added   []string             // tool names pulled since the last Changes
	gone    []string             // tool names removed since the last Changes
}

var (
	_ runtimetools.ArtifactPuller  = (*Installer)(nil)
	_ runtimetools.ArtifactRemover = (*Installer)(nil)
)

// NewInstaller returns the installer of one session.
func NewInstaller(cfg InstallConfig) *Installer {
	if cfg.Allowlist == nil {
		cfg.Allowlist = &Allowlist{}
	}
	return &Installer{cfg: cfg, held: map[string]Installed{}, removed: map[string]Name{}}
}

// Grant returns the grant as pull-artifact's description names it.
func (in *Installer) Grant() runtimetools.InstallGrant {
	g := in.cfg.Grant
	if g == nil {
		return runtimetools.InstallGrant{}
	}
	names := func(ps []Pattern) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.String()
		}
		return out
	}
	from := []string{FromStores}
	if g.Sources {
		from = append(from, FromSources)
	}
	return runtimetools.InstallGrant{Tool: names(g.Tool), Skill: names(g.Skill), From: from}
}

// List lists what pattern (ending in '*') names and the grant lets the capsule pull: at most MaxListed
// matches sorted by name, with how many more matched and why a place could not be read. A pattern that
// reaches no granted name is refused not-granted.
func (in *Installer) List(_ context.Context, pattern string) (runtimetools.ArtifactListing, error) {
	p, err := in.cfg.Grant.CheckPattern(pattern)
	if err != nil {
		return runtimetools.ArtifactListing{}, err
	}
	entries, notes := Catalog(in.cfg.Finder.Stores, p)
	out := runtimetools.ArtifactListing{Pattern: pattern, Notes: notes, Matches: []runtimetools.ArtifactMatch{}}
	for _, e := range entries {
		if !in.cfg.Grant.Allows(e.Runtime, e.Name) {
			continue
		}
		if len(out.Matches) == MaxListed {
			out.Omitted++
			continue
		}
		held := make([]string, len(e.HeldIn))
		for i, h := range e.HeldIn {
			held[i] = string(h)
		}
		out.Matches = append(out.Matches, runtimetools.ArtifactMatch{Artifact: string(e.Name), Runtime: string(e.Runtime),
			Description: e.Description, Versions: e.Versions, NewestFitting: e.NewestFitting, HeldIn: held})
	}
	return out, nil
}

// Remove takes out an artifact the agent pulled, named by its full name or its tool name: its pin, its
// copy in the runtime directory and its allowlist entry. An artifact murmur.yaml declares, a pin the
// operator made, a hook and a driver are refused not-removable; a name the agent holds no pull of is
// reported not removed. A pin the agent made in an earlier session is removed from murmur.lock.
func (in *Installer) Remove(ctx context.Context, value string) (runtimetools.Removed, error) {
	if in.cfg.Grant == nil {
		return runtimetools.Removed{}, noInstall()
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	name, tool, ok := in.nameOf(value)
	if !ok {
		return runtimetools.Removed{Artifact: value}, nil
	}
	if slices.Contains(in.cfg.Declared, name) {
		return runtimetools.Removed{}, refuse(NotRemovable, "%s is declared in murmur.yaml; only the operator takes it out, by editing murmur.yaml", name)
	}
	lock, err := ReadLock(in.cfg.LockPath)
	if err != nil {
		return runtimetools.Removed{}, &Refusal{Kind: NotRemovable, Err: err,
			Msg: fmt.Sprintf("murmur.lock cannot be read, so nothing can be unpinned; the operator must fix it first:\n%s", err)}
	}
	pin, pinned := lock.Get(name)
	h, holding := in.held[tool]
	if holding && h.Artifact.Manifest.Name != name {
		holding = false
	}
	if holding {
		switch rt := h.Artifact.Manifest.Runtime; rt {
		case RuntimeHook, RuntimeDriver:
			return runtimetools.Removed{}, refuse(NotRemovable, "%s is a %s; hooks and drivers are the operator's, declared in murmur.yaml", name, rt)
		}
	}
	if pinned && pin.Origin == OriginOperator {
		return runtimetools.Removed{}, refuse(NotRemovable, "%s is pinned by the operator (origin: operator in murmur.lock); only the operator takes it out", name)
	}
	if !pinned && !holding {
		return runtimetools.Removed{Artifact: string(name)}, nil
	}
	if pinned {
		if err := UpdateLock(ctx, in.cfg.LockPath, func(l *Lock) error {
			if p, ok := l.Get(name); ok && p.Origin == OriginAgent {
				l.Remove(name)
			}
			return nil
		}); err != nil {
			return runtimetools.Removed{}, &Refusal{Kind: NotRemovable, Err: err, Msg: fmt.Sprintf("%s could not be unpinned: %v", name, err)}
		}
	}
	rt := RuntimeTool
	if holding {
		rt = h.Artifact.Manifest.Runtime
		if err := os.RemoveAll(h.Artifact.Dir); err != nil {
			return runtimetools.Removed{}, fmt.Errorf("removing %s: %w", h.Artifact.Dir, err)
		}
		delete(in.held, tool)
		if rt == RuntimeTool {
			in.cfg.Allowlist.Remove(tool)
		}
		in.removed[tool] = name
		in.gone = append(in.gone, tool)
	}
	return runtimetools.Removed{Artifact: string(name), Removed: true, ToolName: tool, Runtime: string(rt)}, nil
}

// nameOf resolves a value remove-artifact was given, "the full name or the tool name" (SPEC): a full
// name as it is; a tool name to the artifact the agent pulled in this session under it, else one
// murmur.yaml declares (tools:, skills:, hooks:), else a pin in murmur.lock, the agent's before the
// operator's. Resolving the tool names of what is not removable lets Remove refuse them by tool name
// as it does by full name, rather than report nothing installed.
func (in *Installer) nameOf(value string) (Name, string, bool) {
	if n, err := ParseName(value); err == nil {
		return n, n.Tool(), true
	}
	if h, ok := in.held[value]; ok {
		return h.Artifact.Manifest.Name, value, true
	}
	for _, n := range in.cfg.Declared {
		if n.Tool() == value {
			return n, value, true
		}
	}
	if lock, err := ReadLock(in.cfg.LockPath); err == nil {
		var operator Name
		for _, p := range lock.Pins {
			switch {
			case p.Name.Tool() != value:
			case p.Origin == OriginAgent:
				return p.Name, value, true
			case operator == "":
				operator = p.Name
			}
		}
		if operator != "" {
			return operator, value, true
		}
	}
	return "", "", false
}

// Removed reports the full name of the artifact remove-artifact took out of this session under tool,
// if it did (and nothing pulled it again since): dispatch refuses a later call to it with SPEC's text.
func (in *Installer) Removed(tool string) (Name, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	n, ok := in.removed[tool]
	return n, ok
}

// Tool returns the tool the agent pulled under tool, if any.
func (in *Installer) Tool(tool string) (*Artifact, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	h, ok := in.held[tool]
	if !ok || h.Artifact.Manifest.Runtime != RuntimeTool {
		return nil, false
	}
	return h.Artifact, true
}

// Tools returns the tools the agent pulled, sorted by tool name.
func (in *Installer) Tools() []*Artifact {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []*Artifact
	for _, t := range in.sortedTools() {
		if h := in.held[t]; h.Skill == nil {
			out = append(out, h.Artifact)
		}
	}
	return out
}

// Skills returns the skills the agent pulled, sorted by tool name.
func (in *Installer) Skills() []Skill {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []Skill
	for _, t := range in.sortedTools() {
		if h := in.held[t]; h.Skill != nil {
			out = append(out, *h.Skill)
		}
	}
	return out
}

func (in *Installer) sortedTools() []string {
	out := make([]string, 0, len(in.held))
	for t := range in.held {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Changes returns the tool names pulled and removed since the last call, each sorted, and forgets them:
// the session calls it before each inference call, refreshes when either is non-empty, and writes
// tools_refreshed with them.
func (in *Installer) Changes() (added, removed []string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	added, removed = in.added, in.gone
	in.added, in.gone = nil, nil
	slices.Sort(added)
	slices.Sort(removed)
	return slices.Compact(added), slices.Compact(removed)
}

// copyTree copies the regular files and directories of src into dst (which exists), refusing anything
// else: an artifact directory holds nothing else once its digest was taken.
func copyTree(src, dst string) error {
	root, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		to := filepath.Join(dst, filepath.FromSlash(p))
		switch t := d.Type(); {
		case p == ".":
			return nil
		case t.IsDir():
			return os.Mkdir(to, 0o755)
		case !t.IsRegular():
			return fmt.Errorf("%s is %s", p, describeMode(t))
		}
		r, err := root.Open(filepath.FromSlash(p))
		if err != nil {
			return err
		}
		defer func() { _ = r.Close() }() // only read
		// Execute bits are kept: a command hook's program must stay runnable.
		mode := fs.FileMode(0o644)
		if fi, err := d.Info(); err == nil && fi.Mode()&0o111 != 0 {
			mode = 0o755
		}
		w, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, r); err != nil {
			_ = w.Close() // already failing: the error returned says what went wrong
			return err
		}
		return w.Close()
	})
}

// CopyTo copies the artifact a into dir (replaced when it exists) and checks the copy digests as a does:
// how a session puts the tools murmur.yaml declares into its runtime directory.
func CopyTo(a *Artifact, dir string) (*Artifact, error) {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".copy-")
	if err != nil {
		return nil, err
	}
	// Gone once renamed into place; on a failure, a hidden leftover whose error the one returned outranks.
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := copyTree(a.Dir, tmp); err != nil {
		return nil, fmt.Errorf("copying %s: %w", a.Ref(), err)
	}
	d, err := Digest(tmp)
	if err != nil {
		return nil, err
	}
	if d != a.Digest {
		return nil, fmt.Errorf("the files of %s changed while they were copied; start again", a.Ref())
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("replacing %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	c := *a
	c.Dir = dir
	return &c, nil
}
