// Package pgtest gives tests a real PostgreSQL: one server per test binary, started lazily by the
// first test that asks for it, from the binaries installed on the machine (Debian's packages put them
// in /usr/lib/postgresql/<version>/bin; the newest such directory is taken first, then `pg_config
// --bindir`, then $PATH). Its data directory, socket directory and log are in a temporary directory;
// it listens on a Unix socket only (listen_addresses is empty), so it collides with nothing. Where
// the binaries are absent, Start skips the test in one line.
//
// PostgreSQL refuses to run as root. When the tests run as root (as on CI machines) the server runs
// as an existing unprivileged user, postgres if it exists and nobody otherwise, through os/exec's
// SysProcAttr.Credential, and the temporary directory is chowned to that user. Otherwise it runs as
// the current user. Everything is Linux-specific (the postmaster is killed with the test binary
// through PR_SET_PDEATHSIG, as a last resort when the binary dies before TestMain can stop it, by a
// panic or a -timeout; its temporary directory, /tmp/pgtest-*, then stays).
//
// The server is made with initdb -A trust --no-sync -E UTF8 --locale=C and runs with
// max_connections=200 and shared_buffers=16MB; fsync is on, as a durability test wants, unless a
// test turns it off with SetFsync. The superuser is postgres, without a password.
//
// A test package that uses it stops the server and removes its directory when the test binary ends,
// by running its tests through Main:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// (With goleak, call goleak.Find after Main has returned: the server's goroutine ends with it.)
// Start fails a test of a binary whose TestMain does not, so no server outlives its tests.
//
// A test then asks for a database of its own:
//
//	dsn := pgtest.Start(t).NewDatabase(t) // host='/tmp/pgtest-…/socket' port=5432 user=postgres dbname='…' …
//	conn, err := pgx.Connect(ctx, dsn)
//
// Stop, Restart and Kill act on the one shared server: a test that uses them must not run in
// parallel with other tests of its binary that use the server. Start brings a stopped or killed
// server back for the next test.
package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// port names the socket file (.s.PGSQL.5432); nothing listens on TCP.
const port = "5432"

// How long a server may take to start or stop before pgtest gives up.
const timeout = time.Minute

// The server of this test binary, started by the first Start.
var (
	once      sync.Once
	shared    *Server
	sharedErr error
	inMain    bool // Main is running the tests
)

// binDirs lists the directories where Start looks for initdb, in order; tests replace it.
var binDirs = func() []string {
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(dir string) int { n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir))); return n }
	slices.SortFunc(versions, func(a, b string) int { return major(b) - major(a) }) // newest first
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		versions = append(versions, strings.TrimSpace(string(out)))
	}
	return append(versions, filepath.SplitList(os.Getenv("PATH"))...)
}

// A Server is a PostgreSQL server of the test binary. Its methods are safe for concurrent use.
type Server struct {
	dir    string // the temporary directory, holding data/, socket/ and log
	data   string
	socket string
	log    string
	bin    string              // the directory of initdb and postgres
	cred   *syscall.Credential // the user the server runs as; nil: the current user
	dbs    atomic.Int64        // databases made so far, to name the next

	mu     sync.Mutex
	proc   *os.Process   // the postmaster; nil when stopped
	exited chan struct{} // closed when proc has exited
}

// Start returns the test binary's server, starting it if no test has, or if one stopped or killed it.
// It skips tb when PostgreSQL's binaries are absent, and fails tb, with the end of the server's log,
// when the server does not start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := findBin()
	if err != nil {
		tb.Skip("PostgreSQL is not installed (no initdb): " + err.Error())
	}
	if !inMain {
		tb.Fatal("pgtest: the test binary must stop its server: func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }")
	}
	once.Do(func() { shared, sharedErr = newServer(bin) })
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.running() {
		if err := shared.start(); err != nil {
			tb.Fatal(err)
		}
	}
	return shared
}

// Main runs the tests of m, then stops the server if one was started and removes its directory. It
// returns m.Run's exit code, for os.Exit.
func Main(m *testing.M) int {
	inMain = true
	code := m.Run()
	if shared != nil {
		shared.Stop()
		// The tests have their result; a directory left behind is only said, for someone to remove.
		if err := os.RemoveAll(shared.dir); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: removing the server's directory:", err)
		}
	}
	return code
}

// findBin returns the first directory of binDirs with initdb, resolving a symbolic link to it (as
// /usr/local/bin/initdb may be), and with postgres next to it.
func findBin() (string, error) {
	dirs := binDirs()
	for _, d := range dirs {
		if d == "" {
			continue
		}
		initdb, err := filepath.EvalSymlinks(filepath.Join(d, "initdb"))
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(initdb), "postgres")); err == nil {
			return filepath.Dir(initdb), nil
		}
	}
	return "", fmt.Errorf("none with postgres beside it in %s (Debian: apt-get install postgresql)", strings.Join(dirs, ":"))
}

// newServer makes a data directory with initdb and starts a server on it.
func newServer(bin string) (_ *Server, err error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	// A socket's path is at most 107 bytes long; a long $TMPDIR falls back to /tmp.
	if len(dir+"/socket/.s.PGSQL."+port) > 100 {
		_ = os.Remove(dir) // empty and in $TMPDIR: left there, it costs nothing
		if dir, err = os.MkdirTemp("/tmp", "pgtest-"); err != nil {
			return nil, err
		}
	}
	s := &Server{dir: dir, data: filepath.Join(dir, "data"), socket: filepath.Join(dir, "socket"),
		log: filepath.Join(dir, "log"), bin: bin}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir) // cleanup on a failed start: the error returned is the one to report
		}
	}()
	if err := os.Mkdir(s.socket, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		var u *user.User
		for _, name := range []string{"postgres", "nobody"} {
			if u, err = user.Lookup(name); err == nil {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("pgtest: PostgreSQL does not run as root, and there is no postgres or nobody user to run it as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{dir, s.socket} {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	initdb := s.command("initdb", "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Stdout, initdb.Stderr = logf, logf
	err = initdb.Run()
	// initdb wrote through its own descriptor, not this one, and the log is only read back to explain a
	// failure.
	_ = logf.Close()
	if err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %v\n%s", err, s.logTail())
	}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// command runs one of the server's binaries as the server's user, in its directory.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

// running reports whether the postmaster is up; s.mu is held.
func (s *Server) running() bool {
	if s.proc == nil {
		return false
	}
	select {
	case <-s.exited: // it died of itself
		s.proc = nil
		return false
	default:
		return true
	}
}

// start starts the postmaster and waits until it accepts connections; s.mu is held.
func (s *Server) start() error {
	logf, err := os.OpenFile(s.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	cmd := s.command("postgres", "-D", s.data, "-k", s.socket, "-p", port, "-c", "listen_addresses=",
		"-c", "max_connections=200", "-c", "shared_buffers=16MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	// The kernel kills the postmaster when the thread that started it ends, which it does when the
	// test binary does: start it from a goroutine locked to its thread until the postmaster has exited.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started, exited := make(chan error), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait() // how it ended is in the log; exited says that it did
			close(exited)
		}
	}()
	err = <-started
	// postgres writes through its own descriptor, not this one, and the log is only read back to
	// explain a failure.
	_ = logf.Close()
	if err != nil {
		return fmt.Errorf("pgtest: starting postgres: %v", err)
	}
	s.proc, s.exited = cmd.Process, exited
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, s.dsn("postgres"))
		if err == nil {
			conn.Close(ctx)
			// The server that answered is ours, not one still on the data directory and socket.
			if pid, _ := os.ReadFile(filepath.Join(s.data, "postmaster.pid")); strings.HasPrefix(string(pid), strconv.Itoa(cmd.Process.Pid)+"\n") {
				cancel()
				return nil
			}
		}
		cancel()
		select {
		case <-exited:
			s.proc = nil
			return fmt.Errorf("pgtest: postgres exited (%v) before accepting connections:\n%s", cmd.ProcessState, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop(syscall.SIGKILL)
			return fmt.Errorf("pgtest: postgres did not accept connections in %v (%v):\n%s", timeout, err, s.logTail())
		}
	}
}

// stop signals the postmaster and waits for it to exit, killing it if it takes longer than timeout;
// s.mu is held.
func (s *Server) stop(sig syscall.Signal) {
	if !s.running() {
		return
	}
	_ = s.proc.Signal(sig) // it may have exited already (ESRCH): nothing to do
	select {
	case <-s.exited:
	case <-time.After(timeout):
		_ = s.proc.Kill() // it may have exited already (ESRCH): nothing to do
		<-s.exited
	}
	s.proc = nil
}

// Stop stops the server as pg_ctl stop -m fast does (SIGINT: open connections are ended, committed
// transactions are kept) and waits until it has exited. Its data directory stays: Start or Restart
// starts it again.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop(syscall.SIGINT)
}

// Restart stops the server as Stop does, if it is running, and starts it again on the same data
// directory: connections open before fail, new ones work.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop(syscall.SIGINT)
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
}

// Kill kills the postmaster with SIGKILL, as a crash would, and returns when its other processes, which
// see it die, have exited too: then no connection to the server works. The server stays down until
// Restart or the next Start, which recover it from its write-ahead log.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		return
	}
	// The postmaster's shared memory segment, which its children keep attached until they exit, is
	// the second number of the 7th line of postmaster.pid.
	shmid := -1
	if pid, err := os.ReadFile(filepath.Join(s.data, "postmaster.pid")); err == nil {
		if lines := strings.Split(string(pid), "\n"); len(lines) > 6 {
			if f := strings.Fields(lines[6]); len(f) == 2 {
				shmid, _ = strconv.Atoi(f[1])
			}
		}
	}
	kids := children(s.proc.Pid)
	s.stop(syscall.SIGKILL)
	if shmid < 0 {
		tb.Fatalf("pgtest: no shared memory segment in %s/postmaster.pid: cannot wait for the killed server's processes", s.data)
	}
	deadline := time.Now().Add(timeout)
	for ; ; time.Sleep(10 * time.Millisecond) {
		var desc unix.SysvShmDesc
		if _, err := unix.SysvShmCtl(shmid, unix.IPC_STAT, &desc); err != nil || desc.Nattch == 0 {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("pgtest: processes of the killed server still run after %v", timeout)
		}
	}
	// A backend detaches the segment on its way out, and may still run for a moment after: wait until
	// each one the postmaster had is gone (or a zombie nobody reaped).
	for _, pid := range kids {
		for alive(pid) {
			if time.Now().After(deadline) {
				tb.Fatalf("pgtest: process %d of the killed server still runs after %v", pid, timeout)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// children returns the processes whose parent is pid, from /proc.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(n); ok && ppid == pid {
			kids = append(kids, n)
		}
	}
	return kids
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != "Z"
}

// procStat reads the state and the parent of process pid from /proc/pid/stat.
func procStat(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid …: comm may hold spaces and parentheses, so the fields follow the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err == nil
}

// SetFsync turns fsync on or off (ALTER SYSTEM, kept across restarts) for the whole server, so for
// every test of the binary. It is on unless a test turns it off.
func (s *Server) SetFsync(tb testing.TB, on bool) {
	tb.Helper()
	value := "off"
	if on {
		value = "on"
	}
	s.exec(tb, "ALTER SYSTEM SET fsync = "+value, "SELECT pg_reload_conf()")
}

// NewDatabase creates an empty database with a name no other test of the binary gets, and returns
// its connection string, a keyword/value DSN that pgx.Connect and pgx.ParseConfig accept:
//
//	host='/tmp/pgtest-…/socket' port=5432 user=postgres dbname='pgtest_3_testname' sslmode=disable
//
// The database is dropped (WITH (FORCE), ending its connections) when tb's test ends, if the server is
// running then.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("pgtest_%d_", s.dbs.Add(1))
	for _, r := range strings.ToLower(tb.Name()) {
		if len(name) < 63 && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			name += string(r)
		}
	}
	ident := pgx.Identifier{name}.Sanitize()
	s.exec(tb, "CREATE DATABASE "+ident)
	tb.Cleanup(func() {
		s.mu.Lock()
		up := s.running()
		s.mu.Unlock()
		if up {
			s.exec(tb, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
		}
	})
	return s.dsn(name)
}

// exec runs statements on the postgres database, failing tb if one fails.
func (s *Server) exec(tb testing.TB, statements ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	for _, q := range statements {
		if _, err := conn.Exec(ctx, q); err != nil {
			tb.Fatalf("pgtest: %s: %v", q, err)
		}
	}
}

// dsn is the connection string of database db.
func (s *Server) dsn(db string) string {
	quote := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return fmt.Sprintf("host='%s' port=%s user=postgres dbname='%s' sslmode=disable",
		quote.Replace(s.socket), port, quote.Replace(db))
}

// logTail is the end of the server's log.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

// URL is dsn (a test database's key=value string) as the postgres:// URL a roster's store: takes, the
// Unix socket's directory and the port in its query, without a password.
func URL(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"host": {cfg.Host}, "port": {strconv.Itoa(int(cfg.Port))}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User(cfg.User), Path: "/" + cfg.Database, RawQuery: q.Encode()}).String()
}
