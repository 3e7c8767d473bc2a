package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/internal/pgtest"
)

// BenchmarkFormationCPU runs a formation of 4 members under load and measures its tasks a second end to
// end and the CPU each member spends per task (issue 34). lead answers each task by calling w1, w2 and
// w3 at once with call-member and answering with their three answers (the script driver: the calls,
// "waiting", the answer); each worker answers at once. 16 closed-loop clients send blocking
// SendMessages to lead; every answer must be the completed task with the three workers' answers.
//
// Each member runs in a process of its own, `mur member --name NAME` (the binary built once by the
// benchmark, as a container of a formation runs it), on a free loopback port, so that what the kernel
// counts for the process (user and system time, /proc/PID/stat, with its reaped children's) is that
// member's alone: its door, its session, its store, its calls' clients. The counts before and after the
// tasks of a block, ÷ the tasks completed, are each member's CPU per task of the formation. The
// benchmark process holds the 16 clients (clients-cpu-ms/task).
//
// The same formation with each member's tasks in a PostgreSQL database of its own runs beside it, the
// two taking turns block by block (pg- metrics; left out where PostgreSQL is not installed). There a
// store's work is partly the database server's: pg-server-cpu-ms/task is the CPU of the PostgreSQL
// server's processes (the postmaster, its live children, and the children it reaped), which serves
// only these members during the block. It never fails for slowness:
//
//	go test -run '^$' -bench FormationCPU -benchtime 10x ./server/
func BenchmarkFormationCPU(b *testing.B) {
	mur := buildMur(b)
	sqlite := startCPUFormation(b, mur, nil, "")
	formations := []*cpuFormation{sqlite}
	if pg := benchPG(b); pg != nil {
		formations = append(formations, startCPUFormation(b, mur, pg, "pg-"))
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: fcpuClients}, Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	for _, f := range formations {
		f.send(b, hc, fcpuClients, fcpuClients) // warm: connections, the peers' clients
	}
	idleCPU(b, formations, fcpuIdle)
	b.Run(fmt.Sprintf("clients=%d", fcpuClients), func(b *testing.B) {
		for _, f := range formations {
			f.reset()
		}
		for range b.N {
			for _, f := range formations {
				f.block(b, hc)
			}
		}
		b.StopTimer()
		for _, f := range formations {
			f.report(b)
		}
		if len(formations) > 1 {
			b.ReportMetric(formations[1].rate()/formations[0].rate(), "pg/sqlite-tasks/s")
			b.ReportMetric(formations[1].formationCPU()/formations[0].formationCPU(), "pg/sqlite-formation-cpu")
		}
		b.ReportMetric(0, "ns/op")
	})
}

const (
	fcpuClients = 16 // closed-loop clients sending to lead
	fcpuTasks   = 32 // lead's tasks per block (per op, per formation)
	// fcpuIdle is how long the processes' CPU is read with no task, for what they spend idle.
	fcpuIdle = 10 * time.Second
)

// fcpuMembers are the formation's members, lead first.
var fcpuMembers = []string{"lead", "w1", "w2", "w3"}

// clockTicks is the unit of /proc/PID/stat's times: USER_HZ, 100 on Linux (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// cpuFormation is a formation of 4 `mur member` processes and what its blocks measured.
type cpuFormation struct {
	prefix     string // "" or "pg-", the metrics' prefix
	lead       string // lead's a2a URL
	procs      []*murProc
	postmaster int // the PostgreSQL server's pid; 0 on SQLite

	took       time.Duration
	tasks      int
	cpu        []int64 // ticks per member, in fcpuMembers' order
	pgCPU      int64   // ticks of the PostgreSQL server
	clientsCPU int64   // ticks of this process
	lat        []time.Duration

	idle   []float64 // each member's CPU with no task, ms a second
	pgIdle float64   // the PostgreSQL server's
}

// idleCPU reads the CPU every process of the formations spends in d with no task (a member's timers
// and sweeps, the database server's background writers): what a member spends a second whatever it
// does, which its CPU per task below includes for the time a task takes.
func idleCPU(b *testing.B, formations []*cpuFormation, d time.Duration) {
	b.Helper()
	type reading struct {
		members []int64
		pg      int64
	}
	read := func() []reading {
		var out []reading
		for _, f := range formations {
			r := reading{}
			for _, p := range f.procs {
				r.members = append(r.members, processCPU(b, p.cmd.Process.Pid))
			}
			if f.postmaster != 0 {
				r.pg = treeCPU(b, f.postmaster)
			}
			out = append(out, r)
		}
		return out
	}
	time.Sleep(time.Second) // the warm-up's last writes settle
	before := read()
	time.Sleep(d)
	after := read()
	perSecond := func(ticks int64) float64 { return float64(ticks) * 1000 / clockTicks / d.Seconds() }
	for i, f := range formations {
		f.idle = nil
		for j := range f.procs {
			f.idle = append(f.idle, perSecond(after[i].members[j]-before[i].members[j]))
		}
		f.pgIdle = perSecond(after[i].pg - before[i].pg)
	}
}

// murProc is one running `mur member`.
type murProc struct {
	name   string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
}

// buildMur builds cmd/mur into a temporary directory and returns the binary's path.
func buildMur(b *testing.B) string {
	b.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(b.TempDir(), "mur")
	start := time.Now()
	cmd := exec.Command(goBin, "build", "-o", out, "github.com/murmur-run/murmur/cmd/mur")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/mur: %v\n%s", err, msg)
	}
	b.Logf("built mur in %v", time.Since(start).Round(time.Millisecond))
	return out
}

// startCPUFormation writes the formation (each member's store in a database of its own on pg, when pg
// is not nil) and starts each member as a `mur member` process, waiting until every door is ready.
func startCPUFormation(b *testing.B, mur string, pg *pgtest.Server, prefix string) *cpuFormation {
	b.Helper()
	root := b.TempDir()
	capsule := func(name, script string) {
		os.MkdirAll(filepath.Join(root, name), 0o755)
		os.WriteFile(filepath.Join(root, name, "murmur.yaml"), []byte("name: "+name+
			"\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\ntask_acceptance: queue\nqueue_size: 64\n"+
			"capabilities: {network: {allow: [localhost]}}\n"), 0o644)
		os.WriteFile(filepath.Join(root, name, "script.yaml"), []byte(script), 0o644)
	}
	var call []string
	for _, w := range fcpuMembers[1:] {
		call = append(call, "{tool: call-member, input: {member: "+w+", task: '{{.task}}'}}")
		capsule(w, "rules:\n  - match: ''\n    turns:\n      - say: '"+w+": {{.task}}'\n")
	}
	capsule("lead", "rules:\n  - match: ''\n    turns:\n      - call: ["+strings.Join(call, ", ")+"]\n      - say: waiting\n"+
		"      - say: '{{range .answers}}{{.output}}; {{end}}'\n")
	f := &cpuFormation{prefix: prefix}
	roster := "formation: cpu\nmembers:\n"
	urls := map[string]string{}
	for _, name := range fcpuMembers {
		addr := freeLoopback(b)
		urls[name] = "http://" + addr
		roster += "  - {name: " + name + ", capsule: ./" + name + ", listen: '" + addr + "'"
		if pg != nil {
			roster += ", store: '" + pgtest.URL(b, pg.NewDatabase(b)) + "'"
		}
		roster += "}\n"
	}
	roster += "reach:\n  - {from: lead, to: [" + strings.Join(fcpuMembers[1:], ", ") + "]}\n"
	rosterPath := filepath.Join(root, "roster.yaml")
	if err := os.WriteFile(rosterPath, []byte(roster), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, name := range fcpuMembers {
		p := &murProc{name: name, stderr: &lockedBuffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(mur, "member", "--roster", rosterPath, "--name", name,
			"--data-dir", filepath.Join(root, "data"), "--log-level", "error")
		p.cmd.Env = append(os.Environ(), "MUR_OPERATOR_TOKEN="+testOperatorToken, "MUR_FORMATION_TOKEN="+testFormationToken,
			"MUR_RECORDS_DIR="+filepath.Join(root, "records"))
		p.cmd.Stderr = p.stderr
		if err := p.cmd.Start(); err != nil {
			b.Fatal(err)
		}
		go func() {
			p.cmd.Wait()
			close(p.done)
		}()
		b.Cleanup(func() {
			p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(20 * time.Second):
				p.cmd.Process.Kill()
				<-p.done
			}
			if b.Failed() {
				b.Logf("%s%s's stderr:\n%s", prefix, name, p.stderr.String())
			}
		})
		f.procs = append(f.procs, p)
	}
	for _, p := range f.procs {
		waitDoorReady(b, p, urls[p.name])
	}
	f.lead = urls["lead"] + "/a2a"
	if pg != nil {
		f.postmaster = postmasterPID(b, pg)
	}
	return f
}

// freeLoopback returns a loopback address with a port nothing listened on a moment ago.
func freeLoopback(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitDoorReady waits until p's door at url answers /readyz with 200.
func waitDoorReady(b *testing.B, p *murProc, url string) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			b.Fatalf("mur member %s exited before its door was ready:\n%s", p.name, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("mur member %s: no ready door at %s after a minute:\n%s", p.name, url, p.stderr.String())
		}
	}
}

// postmasterPID is the pid of pg's postmaster: the parent of a backend's process.
func postmasterPID(b *testing.B, pg *pgtest.Server) int {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), pg.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	var backend int
	if err := conn.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	st, err := procStat(backend)
	if err != nil {
		b.Fatal(err)
	}
	return st.ppid
}

// procStatus is what the benchmark reads of /proc/PID/stat.
type procStatus struct {
	ppid int
	cpu  int64 // utime + stime + cutime + cstime, in clock ticks
}

func procStat(pid int) (procStatus, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStatus{}, err
	}
	// The command's name, in parentheses, may hold spaces: the fields count from the last ')'.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return procStatus{}, fmt.Errorf("/proc/%d/stat: %q", pid, raw)
	}
	f := strings.Fields(string(raw[i+1:])) // f[0] is field 3, the state
	if len(f) < 15 {
		return procStatus{}, fmt.Errorf("/proc/%d/stat: %q", pid, raw)
	}
	var st procStatus
	st.ppid, _ = strconv.Atoi(f[1])
	for _, k := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime: fields 14 to 17
		n, _ := strconv.ParseInt(f[k], 10, 64)
		st.cpu += n
	}
	return st, nil
}

// processCPU is pid's CPU in ticks, with its reaped children's.
func processCPU(b *testing.B, pid int) int64 {
	b.Helper()
	st, err := procStat(pid)
	if err != nil {
		b.Fatal(err)
	}
	return st.cpu
}

// treeCPU is the CPU of pid and of its children, live or reaped: a PostgreSQL server's, whose backends
// come and go with connections (a reaped one's time is in the postmaster's cutime and cstime).
func treeCPU(b *testing.B, pid int) int64 {
	b.Helper()
	total := processCPU(b, pid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		if st, err := procStat(child); err == nil && st.ppid == pid {
			total += st.cpu
		}
	}
	return total
}

func (f *cpuFormation) reset() {
	f.took, f.tasks, f.cpu, f.pgCPU, f.clientsCPU, f.lat = 0, 0, make([]int64, len(f.procs)), 0, 0, nil
}

// block sends fcpuTasks tasks to lead from fcpuClients clients and adds their time and each process's
// CPU to the formation's.
func (f *cpuFormation) block(b *testing.B, hc *http.Client) {
	b.Helper()
	before := make([]int64, len(f.procs))
	for i, p := range f.procs {
		before[i] = processCPU(b, p.cmd.Process.Pid)
	}
	var pg0 int64
	if f.postmaster != 0 {
		pg0 = treeCPU(b, f.postmaster)
	}
	self0 := processCPU(b, os.Getpid())
	took := f.send(b, hc, fcpuClients, fcpuTasks)
	self1 := processCPU(b, os.Getpid())
	if f.postmaster != 0 {
		f.pgCPU += treeCPU(b, f.postmaster) - pg0
	}
	for i, p := range f.procs {
		f.cpu[i] += processCPU(b, p.cmd.Process.Pid) - before[i]
	}
	f.clientsCPU += self1 - self0
	f.took += took
	f.tasks += fcpuTasks
}

// send sends n blocking SendMessages to lead from clients closed-loop goroutines and returns the time
// they took. Every answer must be the completed task with the three workers' answers.
func (f *cpuFormation) send(b *testing.B, hc *http.Client, clients, n int) time.Duration {
	b.Helper()
	return driveChecked(b, hc, f.lead, clients, n, func(i int) []byte { return sendBody(i, false) }, func(i int, answer []byte) bool {
		ok := answeredCompleted(answer)
		for _, w := range fcpuMembers[1:] {
			ok = ok && bytes.Contains(answer, fmt.Appendf(nil, "%s: bench %d", w, i))
		}
		return ok
	}, &f.lat)
}

func (f *cpuFormation) rate() float64 { return float64(f.tasks) / f.took.Seconds() }

// ms is ticks in milliseconds per task.
func (f *cpuFormation) ms(ticks int64) float64 {
	return float64(ticks) * 1000 / clockTicks / float64(f.tasks)
}

// formationCPU is the formation's CPU per task, in milliseconds: its 4 members' and the database server's.
func (f *cpuFormation) formationCPU() float64 {
	var all int64
	for _, t := range f.cpu {
		all += t
	}
	return f.ms(all + f.pgCPU)
}

func (f *cpuFormation) report(b *testing.B) {
	b.ReportMetric(f.rate(), f.prefix+"tasks/s")
	slices.Sort(f.lat)
	b.ReportMetric(float64(f.lat[len(f.lat)/2].Microseconds())/1000, f.prefix+"p50-ms")
	for i, p := range f.procs {
		b.ReportMetric(f.ms(f.cpu[i]), f.prefix+p.name+"-cpu-ms/task")
		b.ReportMetric(f.idle[i], f.prefix+p.name+"-idle-cpu-ms/s")
	}
	if f.postmaster != 0 {
		b.ReportMetric(f.ms(f.pgCPU), f.prefix+"server-cpu-ms/task")
		b.ReportMetric(f.pgIdle, f.prefix+"server-idle-cpu-ms/s")
	}
	b.ReportMetric(f.formationCPU(), f.prefix+"formation-cpu-ms/task")
	b.ReportMetric(f.ms(f.clientsCPU), f.prefix+"clients-cpu-ms/task")
}
