package member

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/sandbox"
)

// program is one command the runtime runs for a capsule: a shell binary, a script capsule's command,
// lifecycle.done_check. Every one goes through Session.start, so every one gets the same confinement.
type program struct {
	id   string // names its cgroups; a work id
	path string // the executable's absolute path
	name string // its argv[0]
	args []string
	// env is added to the environment every command gets (PATH, HOME, TMPDIR, LANG); nothing of mur's
	// own environment is passed on.
	env   []string
	stdin io.Reader // nil: /dev/null
	// stdout and stderr receive the two streams; given the same writer, both go through one pipe, so
	// the order read is the order written.
	stdout, stderr io.Writer
	memMB          int      // the memory limit; 0: none
	read           []string // paths it may read and execute besides the capsule's (a command hook's artifact)
}

// proc is a started program.
type proc struct {
	pid    int
	cg     *sandbox.Cgroups
	exited chan struct{} // closed when the program itself has exited
	// done is closed once what it left behind is gone, its output read, and its cgroups removed;
	// the fields below are set then.
	done      chan struct{}
	exitCode  int  // 128+N for a program ended by signal N
	oom       bool // the kernel killed a process of it for its memory limit
	lingering bool // processes it started still held its output after it exited
}

// kill ends the program's process group and everything in its cgroups.
func (p *proc) kill() {
	syscall.Kill(-p.pid, syscall.SIGKILL)
	p.cg.KillAll()
}

// confinement is the helper's instructions for a command of this session: read and execute the system
// directories, the capsule directory and capabilities.shell.read; write the workdir; never the data
// directory, the records or $HOME, except the workdir; no network unless capabilities.shell.network.
func (s *Session) confinement(work string, memBytes uint64, cg *sandbox.Cgroups) sandbox.Spec {
	g := s.cfg.Capsule.Capabilities.Shell
	spec := sandbox.Spec{
		Landlock: s.confined(),
		Read:     append([]string{s.cfg.Capsule.Dir}, s.readGrants()...),
		Write:    []string{work},
		Deny:     s.secretDirs(),
		Network:  g.Network,
		Mem:      memBytes,
		Cgroups:  cg.Extra,
		Kill:     cg.Kill,
		Parent:   os.Getpid(),
	}
	if cg.Mem != "" {
		spec.Mem = 0 // the kernel holds the whole tree to it, and says when it stepped in
	}
	return spec
}

// secretDirs are the directories no command may read: the data directory (tokens, task stores), the
// records, and mur's $HOME.
func (s *Session) secretDirs() []string {
	var out []string
	for _, d := range []string{s.cfg.DataDir, s.cfg.RecordsRoot} {
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
func (s *Session) readGrants() []string {
	var out []string
	for _, p := range s.cfg.Capsule.Capabilities.Shell.Read {
		if s.secretGrant(p) == "" {
			out = append(out, p)
		}
	}
	return out
}

// secretGrant returns the data or records directory that holds p, or "".
func (s *Session) secretGrant(p string) string {
	for _, d := range []string{s.cfg.DataDir, s.cfg.RecordsRoot} {
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
		if sandbox.Within(rp, rd) {
			return d
		}
	}
	return ""
}

// start runs p in the workdir with a clean environment, in a process group of its own and, where the
// host allows, a PID namespace and a cgroup of its own (so ending it ends everything it started), a
// network namespace of its own unless capabilities.shell.network, its memory limit, and, through the
// helper, its Landlock rules (confinement). Its output is copied to p.stdout and p.stderr until the
// program and everything it started have let go of it.
func (s *Session) start(p program) (*proc, error) {
	work := s.workdir()
	tmp := filepath.Join(work, ".tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	env := sandbox.SecretFree(append([]string{"PATH=" + strings.Join(sandbox.TrustedPath, ":"), "HOME=" + work, "TMPDIR=" + tmp, "LANG=C.UTF-8"}, p.env...),
		s.cfg.FormationToken)
	memBytes := uint64(p.memMB) << 20
	if s.cfg.ConfineHelper == "" {
		memBytes = 0 // unconfined (tests): no helper to apply a limit or join a v1 cgroup
	}
	cg, err := sandbox.NewCgroups(s.iso, p.id, memBytes)
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	if s.cfg.ConfineHelper != "" {
		cmd = exec.Command(s.cfg.ConfineHelper, append([]string{sandbox.ConfineCommand, p.path, p.name}, p.args...)...)
		spec := s.confinement(work, memBytes, cg)
		spec.Read = append(spec.Read, p.read...)
		cmd.Env = append(env, spec.Encode())
	} else {
		cmd = exec.Command(p.path, p.args...)
		cmd.Args[0] = p.name
		cmd.Env = env
	}
	cmd.Dir = work
	cmd.Stdin = p.stdin
	// A leftover holding stdin does not hold up Wait for long.
	cmd.WaitDelay = sandbox.LingerWait
	// Each stream has a pipe of our own: the pipe's identity tells which leftover processes still hold
	// the command's output.
	writers := []io.Writer{p.stdout}
	if p.stderr != p.stdout {
		writers = append(writers, p.stderr)
	}
	var readers, pipeWriters []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	for range writers {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(readers)
			closeAll(pipeWriters)
			cg.Remove()
			return nil, err
		}
		readers, pipeWriters = append(readers, r), append(pipeWriters, w)
	}
	cmd.Stdout, cmd.Stderr = pipeWriters[0], pipeWriters[len(pipeWriters)-1]
	// A process group of its own, and where the host allows, a PID namespace (when its PID 1, the
	// helper as the command's init, ends with the command, the kernel kills every process it started),
	// a network namespace, and a cgroup (cgroup.kill ends them all).
	flags := s.iso.PidNS
	if !s.cfg.Capsule.Capabilities.Shell.Network {
		flags |= s.iso.NetNS
	}
	cmd.SysProcAttr = sandbox.PidNSAttr(flags)
	if s.cfg.ConfineHelper != "" && flags&syscall.CLONE_NEWPID == 0 {
		// The helper, the command's init, watches for mur's death itself and then ends the command's
		// cgroup and process group; a SIGKILL here would end the init before it could.
		cmd.SysProcAttr.Pdeathsig = 0
	}
	if cg.Fd >= 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cg.Fd
	}
	err = cmd.Start()
	closeAll(pipeWriters)
	if err != nil {
		closeAll(readers)
		cg.Remove()
		return nil, err
	}
	var copying sync.WaitGroup
	for i, r := range readers {
		copying.Go(func() { io.Copy(writers[i], r) })
	}
	copied := make(chan struct{})
	go func() {
		copying.Wait()
		close(copied)
	}()
	pr := &proc{pid: cmd.Process.Pid, cg: cg, exited: make(chan struct{}), done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(pr.exited)
		// Whatever it left behind goes with it. Where the host lets the runtime reach every process the
		// command started, they end at once; otherwise they get lingerWait to let go of the output.
		var lingering bool
		if s.iso.TreeKill() {
			for _, r := range readers {
				lingering = lingering || cg.HoldsPipe(r)
			}
			pr.kill()
		} else {
			select {
			case <-copied:
			case <-time.After(sandbox.LingerWait):
				lingering = true
			}
			pr.kill()
		}
		select {
		case <-copied:
		case <-time.After(sandbox.LingerWait): // a process out of reach still holds the pipe: stop reading it
		}
		closeAll(readers)
		<-copied
		pr.oom = cg.OomKilled()
		if err := cg.Remove(); err != nil {
			s.log.Warn("removing a command's cgroup", "work_id", p.id, "err", err)
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			pr.exitCode = 128 + int(ws.Signal())
		} else {
			pr.exitCode = cmd.ProcessState.ExitCode()
		}
		pr.lingering = lingering
		close(pr.done)
	}()
	return pr, nil
}

// capsuleProgram resolves a command murmur.yaml names (script.command, lifecycle.done_check): a path
// with a slash is the capsule's own, resolved against its directory; a bare name is found on the
// trusted PATH.
func (s *Session) capsuleProgram(command []string) (program, error) {
	name := command[0]
	path := name
	if strings.Contains(name, "/") {
		path = capsule.ResolvePath(s.cfg.Capsule.Dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			return program{}, err
		}
		if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return program{}, fmt.Errorf("%s is not an executable file", path)
		}
	} else {
		p, err := sandbox.ResolveShell(name)
		if err != nil {
			return program{}, fmt.Errorf("%s is in none of %s", name, strings.Join(sandbox.TrustedPath, ", "))
		}
		path = p
	}
	return program{
		id: ids.NewWorkID(), path: path, name: name, args: command[1:],
		env: []string{
			"MUR_MEMBER=" + s.cfg.Member,
			"MUR_FORMATION=" + s.cfg.Formation,
			"MUR_SESSION=" + s.id,
			"MUR_CAPSULE_DIR=" + s.cfg.Capsule.Dir,
		},
		memMB: s.cfg.Capsule.Capabilities.Shell.MemoryMB,
	}, nil
}

// runCommand runs a command murmur.yaml names to its end, or until ctx ends, which kills it and
// everything it started. It returns the exit code; an error when it could not start or ctx ended.
func (s *Session) runCommand(ctx context.Context, command []string, stdin io.Reader, stdout, stderr io.Writer, env ...string) (int, error) {
	p, err := s.capsuleProgram(command)
	if err != nil {
		return 0, err
	}
	p.env = append(p.env, env...)
	p.stdin, p.stdout, p.stderr = stdin, stdout, stderr
	pr, err := s.start(p)
	if err != nil {
		return 0, err
	}
	select {
	case <-pr.done:
		return pr.exitCode, nil
	case <-ctx.Done():
		pr.kill()
		<-pr.done
		return pr.exitCode, ctx.Err()
	}
}
