package sandbox

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/capsule"
)

// RunnerConfig is what a session's runner is given: plain values, read-only.
type RunnerConfig struct {
	Capsule       *capsule.Capsule
	Isolation     Isolation // what the host gives (Probe)
	Landlock      bool      // commands run under their Landlock rules
	ConfineHelper string    // the executable that runs ConfineCommand (mur itself); "" runs commands directly
	Workdir       string    // absolute; where commands run and the only place they write
	DataDir       string    // never readable by a command
	RecordsRoot   string    // never readable by a command
	Member        string
	Formation     string
	Session       string // the session id, MUR_SESSION
	// Secrets are kept out of every command's environment (DropSecrets): the formation token, the
	// operator token, the control tokens.
	Secrets []Secret
	Log     *slog.Logger
}

// Runner starts a session's commands, each confined the same way.
type Runner struct{ cfg RunnerConfig }

// NewRunner returns the runner of one session.
func NewRunner(cfg RunnerConfig) *Runner { return &Runner{cfg: cfg} }

// Secrets returns the secrets the runner keeps out of every command's environment, for what starts
// programs of its own through it (a sub-session) or checks an environment before it does (harness.env).
func (r *Runner) Secrets() []Secret { return slices.Clone(r.cfg.Secrets) }

// Program is one command the runtime runs for a capsule: a shell binary, a script capsule's command,
// lifecycle.done_check. Every one goes through Runner.Start, so every one gets the same confinement.
type Program struct {
	ID   string // names its cgroups; a work id
	Path string // the executable's absolute path
	Name string // its argv[0]
	Args []string
	// Env is added to the environment every command gets (PATH, HOME, TMPDIR, LANG); nothing of mur's
	// own environment is passed on.
	Env   []string
	Stdin io.Reader // nil: /dev/null
	// stdout and stderr receive the two streams; given the same writer, both go through one pipe, so
	// the order read is the order written.
	Stdout, Stderr io.Writer
	MemMB          int      // the memory limit; 0: none
	Read           []string // paths it may read and execute besides the capsule's (a command hook's artifact)
	// Harness, when set, replaces the shell binaries' read grants and network with its own (a harness
	// under transport: process, DESIGN §13).
	Harness *HarnessGrant
}

// HarnessGrant is what a harness may reach beyond its workdir and the system directories.
type HarnessGrant struct {
	Read    []string
	Network bool
	Port    int // the tool server's port, reachable without network
}

// Proc is a started program.
type Proc struct {
	Pid     int
	Cgroups *Cgroups
	Exited  chan struct{} // closed when the program itself has exited
	// done is closed once what it left behind is gone, its output read, and its cgroups removed;
	// the fields below are set then.
	Done      chan struct{}
	ExitCode  int  // 128+N for a program ended by signal N
	OOM       bool // the kernel killed a process of it for its memory limit
	Lingering bool // processes it started still held its output after it exited
}

// Kill ends the program's process group and everything in its cgroups.
func (p *Proc) Kill() {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL) // it may have exited already (ESRCH): nothing to do
	p.Cgroups.KillAll()
}

// confinement is the helper's instructions for a command of this session: read and execute the system
// directories, the capsule directory and capabilities.shell.read; write the workdir; never the data
// directory, the records or $HOME, except the workdir; no network unless capabilities.shell.network.
func (r *Runner) confinement(work string, memBytes uint64, cg *Cgroups, hg *HarnessGrant) Spec {
	g := r.cfg.Capsule.Capabilities.Shell
	read, network := append([]string{r.cfg.Capsule.Dir}, r.readGrants()...), g.Network
	var ports []int
	if hg != nil {
		read, network = hg.Read, hg.Network
		if hg.Port > 0 {
			ports = []int{hg.Port}
		}
	}
	spec := Spec{
		Landlock:     r.cfg.Landlock,
		Read:         read,
		Write:        []string{work},
		Deny:         r.secretDirs(),
		Network:      network,
		ConnectPorts: ports,
		Mem:          memBytes,
		Cgroups:      cg.Extra,
		Kill:         cg.Kill,
		Parent:       os.Getpid(),
	}
	if cg.Mem != "" {
		spec.Mem = 0 // the kernel holds the whole tree to it, and says when it stepped in
	}
	return spec
}

// secretDirs are the directories no command may read: the data directory (tokens, task stores), the
// records, and mur's $HOME.
func (r *Runner) secretDirs() []string {
	var out []string
	for _, d := range []string{r.cfg.DataDir, r.cfg.RecordsRoot} {
		if d != "" {
			if abs, err := filepath.Abs(d); err == nil {
				out = append(out, abs)
			}
		}
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
		out = append(out, filepath.Clean(home))
	}
	return out
}

// readGrants is capabilities.shell.read less the entries inside the data directory or the records:
// those stay out of reach whatever murmur.yaml says (Start logs each).
func (r *Runner) readGrants() []string {
	var out []string
	for _, p := range r.cfg.Capsule.Capabilities.Shell.Read {
		if r.secretGrant(p) == "" {
			out = append(out, p)
		}
	}
	return out
}

// WarnSecretReads logs a warning for every path of capabilities.shell.read inside the data or records
// directory: commands may not read it.
func (r *Runner) WarnSecretReads() {
	for _, p := range r.cfg.Capsule.Capabilities.Shell.Read {
		if d := r.secretGrant(p); d != "" {
			r.cfg.Log.Warn("capabilities.shell.read lists a path inside the data or records directory; commands may not read it",
				"path", p, "directory", d, "capsule", r.cfg.Capsule.Path)
		}
	}
}

// secretGrant returns the data or records directory that holds p, or "".
func (r *Runner) secretGrant(p string) string {
	for _, d := range []string{r.cfg.DataDir, r.cfg.RecordsRoot} {
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		rp, rd := p, abs
		if r, err := filepath.EvalSymlinks(p); err == nil {
			rp = r
		}
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			rd = r
		}
		if Within(rp, rd) {
			return d
		}
	}
	return ""
}

// Start runs p in the workdir with a clean environment, in a process group of its own and, where the
// host allows, a PID namespace and a cgroup of its own (so ending it ends everything it started), a
// network namespace of its own unless capabilities.shell.network, its memory limit, and, through the
// helper, its Landlock rules (confinement). Its output is copied to p.stdout and p.stderr until the
// program and everything it started have let go of it.
func (r *Runner) Start(p Program) (*Proc, error) {
	work := r.cfg.Workdir
	tmp := filepath.Join(work, ".tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	memBytes := uint64(p.MemMB) << 20
	if r.cfg.ConfineHelper == "" {
		memBytes = 0 // unconfined (tests): no helper to apply a limit or join a v1 cgroup
	}
	cg, err := NewCgroups(r.cfg.Isolation, p.ID, memBytes)
	if err != nil {
		return nil, err
	}
	cmd := r.command(p, work, tmp, memBytes, cg)
	// Each stream has a pipe of our own: the pipe's identity tells which leftover processes still hold
	// the command's output.
	writers := []io.Writer{p.Stdout}
	if p.Stderr != p.Stdout {
		writers = append(writers, p.Stderr)
	}
	readers, pipeWriters, err := pipes(len(writers))
	if err != nil {
		_ = cg.Remove() // cleanup on a failed path: the error returned is the one to report
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pipeWriters[0], pipeWriters[len(pipeWriters)-1]
	cmd.SysProcAttr = r.procAttr(p, cg)
	err = cmd.Start()
	closeFiles(pipeWriters)
	if err != nil {
		closeFiles(readers)
		_ = cg.Remove() // cleanup on a failed path: the error returned is the one to report
		return nil, err
	}
	copied := copyOutput(writers, readers)
	pr := &Proc{Pid: cmd.Process.Pid, Cgroups: cg, Exited: make(chan struct{}), Done: make(chan struct{})}
	go r.reap(p, pr, cmd, readers, copied)
	return pr, nil
}

// command is the exec.Cmd of p: through the confinement helper with its Landlock rules, or directly
// when there is none; in the workdir, with a clean environment that keeps the secrets out.
func (r *Runner) command(p Program, work, tmp string, memBytes uint64, cg *Cgroups) *exec.Cmd {
	env := SecretFree(append([]string{"PATH=" + strings.Join(TrustedPath, ":"), "HOME=" + work, "TMPDIR=" + tmp, "LANG=C.UTF-8"}, p.Env...),
		r.cfg.Secrets)
	var cmd *exec.Cmd
	if r.cfg.ConfineHelper != "" {
		cmd = exec.Command(r.cfg.ConfineHelper, append([]string{ConfineCommand, p.Path, p.Name}, p.Args...)...)
		spec := r.confinement(work, memBytes, cg, p.Harness)
		spec.Read = append(spec.Read, p.Read...)
		cmd.Env = append(env, spec.Encode())
	} else {
		cmd = exec.Command(p.Path, p.Args...)
		cmd.Args[0] = p.Name
		cmd.Env = env
	}
	cmd.Dir = work
	cmd.Stdin = p.Stdin
	// A leftover holding stdin does not hold up Wait for long.
	cmd.WaitDelay = LingerWait
	return cmd
}

// pipes makes n pipes, their read ends and their write ends; on a failure it closes those it made.
func pipes(n int) ([]*os.File, []*os.File, error) {
	var readers, writers []*os.File
	for range n {
		r, w, err := os.Pipe()
		if err != nil {
			closeFiles(readers)
			closeFiles(writers)
			return nil, nil, err
		}
		readers, writers = append(readers, r), append(writers, w)
	}
	return readers, writers, nil
}

// closeFiles closes pipe ends: the read ends were only read, and the command wrote through its own
// copies of the write ends, not these.
func closeFiles(fs []*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// procAttr puts p in a process group of its own, and where the host allows, a PID namespace (when its
// PID 1, the helper as the command's init, ends with the command, the kernel kills every process it
// started), a network namespace, and the cgroup cg (cgroup.kill ends them all).
func (r *Runner) procAttr(p Program, cg *Cgroups) *syscall.SysProcAttr {
	flags := r.cfg.Isolation.PidNS
	network := r.cfg.Capsule.Capabilities.Shell.Network
	if p.Harness != nil {
		// A harness always reaches its tool server on loopback, so it keeps the host's network namespace;
		// without harness.network, Landlock lets it connect to that one port only.
		network = true
	}
	if !network {
		flags |= r.cfg.Isolation.NetNS
	}
	attr := PidNSAttr(flags)
	if r.cfg.ConfineHelper != "" && flags&syscall.CLONE_NEWPID == 0 {
		// The helper, the command's init, watches for mur's death itself and then ends the command's
		// cgroup and process group; a SIGKILL here would end the init before it could.
		attr.Pdeathsig = 0
	}
	if cg.Fd >= 0 {
		attr.UseCgroupFD, attr.CgroupFD = true, cg.Fd
	}
	return attr
}

// copyOutput copies each reader to its writer; the channel it returns is closed once every copy is done.
func copyOutput(writers []io.Writer, readers []*os.File) <-chan struct{} {
	var copying sync.WaitGroup
	for i, r := range readers {
		// It ends at EOF, or with the error of a read from the pipe reap closed once a process out of reach
		// held it: the output's end either way. The writers keep their own errors (shellOutput.logErr).
		copying.Go(func() { _, _ = io.Copy(writers[i], r) })
	}
	copied := make(chan struct{})
	go func() {
		copying.Wait()
		close(copied)
	}()
	return copied
}

// reap waits for the started command, closes pr.Exited, ends what it left behind, stops reading its
// output (readers; copied is closed once it is all copied), removes its cgroups, sets pr's exit fields
// and closes pr.Done.
func (r *Runner) reap(p Program, pr *Proc, cmd *exec.Cmd, readers []*os.File, copied <-chan struct{}) {
	cg := pr.Cgroups
	// How it exited is read from cmd.ProcessState below. Any other error is about stdin not copied whole
	// (its reader failed, or ErrWaitDelay: a leftover held the pipe), which the command saw as its end.
	_ = cmd.Wait()
	close(pr.Exited)
	// Whatever it left behind goes with it. Where the host lets the runtime reach every process the
	// command started, they end at once; otherwise they get lingerWait to let go of the output.
	var lingering bool
	if r.cfg.Isolation.TreeKill() {
		for _, rd := range readers {
			lingering = lingering || cg.HoldsPipe(rd)
		}
		pr.Kill()
	} else {
		select {
		case <-copied:
		case <-time.After(LingerWait):
			lingering = true
		}
		pr.Kill()
	}
	select {
	case <-copied:
	case <-time.After(LingerWait): // a process out of reach still holds the pipe: stop reading it
	}
	closeFiles(readers)
	<-copied
	pr.OOM = cg.OomKilled()
	if err := cg.Remove(); err != nil {
		r.cfg.Log.Warn("removing a command's cgroup", "work_id", p.ID, "err", err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		pr.ExitCode = 128 + int(ws.Signal())
	} else {
		pr.ExitCode = cmd.ProcessState.ExitCode()
	}
	pr.Lingering = lingering
	close(pr.Done)
}

// capsuleProgram resolves a command murmur.yaml names (script.command, lifecycle.done_check): a path
// with a slash is the capsule's own, resolved against its directory; a bare name is found on the
// trusted PATH.
func (r *Runner) capsuleProgram(command []string) (Program, error) {
	name := command[0]
	path := name
	if strings.Contains(name, "/") {
		path = capsule.ResolvePath(r.cfg.Capsule.Dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			return Program{}, err
		}
		if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return Program{}, fmt.Errorf("%s is not an executable file", path)
		}
	} else {
		p, err := ResolveShell(name)
		if err != nil {
			return Program{}, fmt.Errorf("%s is in none of %s", name, strings.Join(TrustedPath, ", "))
		}
		path = p
	}
	return Program{
		ID: ids.NewWorkID(), Path: path, Name: name, Args: command[1:],
		Env: []string{
			"MUR_MEMBER=" + r.cfg.Member,
			"MUR_FORMATION=" + r.cfg.Formation,
			"MUR_SESSION=" + r.cfg.Session,
			"MUR_CAPSULE_DIR=" + r.cfg.Capsule.Dir,
		},
		MemMB: r.cfg.Capsule.Capabilities.Shell.MemoryMB,
	}, nil
}

// RunCommand runs a command murmur.yaml names to its end, or until ctx ends, which kills it and
// everything it started. It returns the exit code; an error when it could not start or ctx ended.
func (r *Runner) RunCommand(ctx context.Context, command []string, stdin io.Reader, stdout, stderr io.Writer, env ...string) (int, error) {
	p, err := r.capsuleProgram(command)
	if err != nil {
		return 0, err
	}
	p.Env = append(p.Env, env...)
	p.Stdin, p.Stdout, p.Stderr = stdin, stdout, stderr
	return r.Run(ctx, p)
}

// Run starts p, confined as every command is, and waits for its end, or until ctx ends, which kills
// it and everything it started. It returns the exit code; an error when it could not start or ctx
// ended.
func (r *Runner) Run(ctx context.Context, p Program) (int, error) {
	pr, err := r.Start(p)
	if err != nil {
		return 0, err
	}
	select {
	case <-pr.Done:
		return pr.ExitCode, nil
	case <-ctx.Done():
		pr.Kill()
		<-pr.Done
		return pr.ExitCode, ctx.Err()
	}
}
