package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkFormationReady starts `mur run` on a generated formation of script members, 100, 300 and
// 1,000 of them, each with its own capsule (half of them granted a shell tool), and measures how long
// the formation takes to be ready (from the process's start until every member's /readyz has answered
// 200), the CPU the process spent until then, and its RSS then. It prints a table with each size's
// ratios to the first, which should grow no faster than the member count. It asserts nothing about
// time: run it with
//
//	go test ./cmd/mur -run '^$' -bench FormationReady -benchtime 1x
//
// MUR_BENCH_MEMBERS=100,300 picks other sizes. MUR_BENCH_HEAP=FILE starts the formation inside the
// test's own process instead, so that -cpuprofile covers the start, and writes the heap once the
// formation is ready to FILE-<members> (the RSS is then the test process's).
func BenchmarkFormationReady(b *testing.B) {
	sizes := []int{100, 300, 1000}
	if s := os.Getenv("MUR_BENCH_MEMBERS"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("MUR_BENCH_MEMBERS=%q: give sizes such as 100,300,1000", s)
			}
			sizes = append(sizes, n)
		}
	}
	var results []scaleResult
	for _, n := range sizes {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			var sum scaleResult
			for range b.N {
				r := startScaleFormation(b, n)
				sum.ready += r.ready
				sum.rssMB += r.rssMB
				sum.cpu += r.cpu
			}
			r := scaleResult{members: n, ready: sum.ready / time.Duration(b.N), rssMB: sum.rssMB / float64(b.N), cpu: sum.cpu / float64(b.N)}
			b.ReportMetric(r.ready.Seconds(), "s-ready")
			b.ReportMetric(r.cpu, "s-cpu")
			b.ReportMetric(r.rssMB, "MB-rss")
			b.ReportMetric(r.rssMB*1024/float64(n), "KB-rss/member")
			results = append(results, r)
		})
	}
	if len(results) == 0 {
		return
	}
	base := results[0]
	var t strings.Builder
	fmt.Fprintf(&t, "\n| members | ready | CPU until ready | RSS | ready ÷ %d's | CPU ÷ %d's | RSS ÷ %d's | members ÷ %d's |\n|---|---|---|---|---|---|---|---|\n",
		base.members, base.members, base.members, base.members)
	for _, r := range results {
		fmt.Fprintf(&t, "| %d | %.2f s | %.2f s | %.0f MB | %.2f | %.2f | %.2f | %.2f |\n", r.members, r.ready.Seconds(), r.cpu, r.rssMB,
			r.ready.Seconds()/base.ready.Seconds(), r.cpu/base.cpu, r.rssMB/base.rssMB, float64(r.members)/float64(base.members))
	}
	fmt.Print(t.String())
}

// scaleResult is one start of BenchmarkFormationReady's.
type scaleResult struct {
	members int
	ready   time.Duration
	rssMB   float64
	cpu     float64 // seconds of CPU (user and system) the process spent until ready
}

// writeScaleFormation writes a roster of n script members into dir, each with its own capsule and a
// door on a free port, the first reaching every other.
func writeScaleFormation(tb testing.TB, dir string, n int) string {
	tb.Helper()
	var r strings.Builder
	r.WriteString("formation: scale\nentry: m0000\nmembers:\n")
	var others []string
	for i := range n {
		name := fmt.Sprintf("m%04d", i)
		if i > 0 {
			others = append(others, name)
		}
		fmt.Fprintf(&r, "  - name: %s\n    capsule: ./%s\n    listen: 127.0.0.1:0\n", name, name)
		capsule := fmt.Sprintf(`name: %s
description: answers every task at once
instructions: You are %s. Answer every task.
inference:
  driver: local
  choices:
    local: {driver: script, script: script.yaml}
task_acceptance: queue
`, name, name)
		if i%2 == 1 { // half of them may run a program, as mur init's worker does
			capsule += "capabilities:\n  shell: {allow: [tr]}\n"
		}
		script := "rules:\n  - match: ''\n    turns:\n      - say: 'heard: {{.task}}'\n"
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			tb.Fatal(err)
		}
		for file, text := range map[string]string{"murmur.yaml": capsule, "script.yaml": script} {
			if err := os.WriteFile(filepath.Join(dir, name, file), []byte(text), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(&r, "reach:\n  - from: m0000\n    to: [%s]\n", strings.Join(others, ", "))
	}
	path := filepath.Join(dir, "roster.yaml")
	if err := os.WriteFile(path, []byte(r.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

var doorLine = regexp.MustCompile(`^\s+m\d+\s+(http://\S+)/a2a$`)

// startScaleFormation runs mur run on a fresh formation of n members, as this test binary in a process
// of its own (or, with MUR_BENCH_HEAP set, inside this process), and returns the time until every
// door's /readyz answered 200, and the process's RSS (in MB) and CPU time then.
func startScaleFormation(b *testing.B, n int) scaleResult {
	b.Helper()
	b.StopTimer()
	dir := b.TempDir()
	rosterPath := writeScaleFormation(b, dir, n)
	args := []string{"run", "--roster", rosterPath, "--data-dir", filepath.Join(dir, "data"), "--console", "off", "--log-level", "warn"}
	env := map[string]string{"MUR_OPERATOR_TOKEN": "op", "MUR_FORMATION_TOKEN": "fm",
		"MUR_RECORDS_DIR": filepath.Join(dir, "records"), "HOME": dir}
	heap := os.Getenv("MUR_BENCH_HEAP")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	pr, pw := io.Pipe()
	var wait func()
	pid := os.Getpid()
	b.StartTimer()
	start := time.Now()
	if heap != "" {
		done := make(chan error, 1)
		go func() {
			getenv := func(k string) string {
				if v, ok := env[k]; ok {
					return v
				}
				return os.Getenv(k)
			}
			done <- run(ctx, args, getenv, pw, &stderr)
			pw.Close()
		}()
		wait = func() { <-done }
	} else {
		cmd := exec.CommandContext(ctx, os.Args[0], args...)
		cmd.Env = append(os.Environ(), "MUR_TEST_AS_MUR=1")
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 60 * time.Second
		cmd.Stdout, cmd.Stderr = pw, &stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		pid = cmd.Process.Pid
		wait = func() { cmd.Wait(); pw.Close() }
	}
	defer func() {
		cancel()
		wait()
	}()
	var urls []string
	sc := bufio.NewScanner(pr)
	for len(urls) < n && sc.Scan() {
		if m := doorLine.FindStringSubmatch(sc.Text()); m != nil {
			urls = append(urls, m[1])
		}
	}
	go func() { // keep the pipe drained
		for sc.Scan() {
		}
	}()
	if len(urls) < n {
		b.Fatalf("mur run printed %d door(s) of %d\n%s", len(urls), n, stderr.String())
	}
	waitReady(b, urls)
	ready := time.Since(start)
	b.StopTimer()
	rss, cpu := processRSS(b, pid), processCPU(b, pid)
	logInodes(b, n, filepath.Join(dir, "data"), filepath.Join(dir, "records"))
	if heap != "" {
		runtime.GC()
		f, err := os.Create(fmt.Sprintf("%s-%d", heap, n))
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		f.Close()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mb := func(v uint64) float64 { return float64(v) / (1 << 20) }
		b.Logf("%d members: RSS %.0f MB; Go heap in use %.0f MB (of %.0f MB the heap holds), goroutine stacks %.0f MB, "+
			"Go runtime in all %.0f MB; %d goroutines", n, rss, mb(ms.HeapInuse), mb(ms.HeapSys-ms.HeapReleased), mb(ms.StackInuse),
			mb(ms.Sys-ms.HeapReleased), runtime.NumGoroutine())
	}
	b.StartTimer()
	return scaleResult{members: n, ready: ready, rssMB: rss, cpu: cpu}
}

// logInodes logs the files and directories a member's start made under roots, on average: each is an
// inode the file system allocated, the most of a start's system time.
func logInodes(b *testing.B, members int, roots ...string) {
	b.Helper()
	count := map[string]int{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			kind := "files"
			if d.IsDir() {
				kind = "directories"
			}
			count[kind]++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	per := func(k string) float64 { return float64(count[k]) / float64(members) }
	b.Logf("a member's start left %.1f inodes: %.1f directories, %.1f files", per("directories")+per("files"), per("directories"), per("files"))
}

// waitReady polls every door's /readyz, 16 at a time, until each has answered 200.
func waitReady(b *testing.B, urls []string) {
	b.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableKeepAlives: true}}
	deadline := time.Now().Add(5 * time.Minute)
	work := make(chan string)
	var wg sync.WaitGroup
	var failed sync.Once
	var failure string
	for range 16 {
		wg.Go(func() {
			for u := range work {
				for {
					res, err := client.Get(u + "/readyz")
					if err == nil {
						res.Body.Close()
						if res.StatusCode == http.StatusOK {
							break
						}
					}
					if time.Now().After(deadline) {
						failed.Do(func() { failure = fmt.Sprintf("%s/readyz: %v", u, err) })
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	for _, u := range urls {
		work <- u
	}
	close(work)
	wg.Wait()
	if failure != "" {
		b.Fatal(failure)
	}
}

// processRSS reads the resident set of process pid from /proc, in MB, and logs its parts: anonymous
// memory (the Go heap and stacks, SQLite's allocations), file pages (the executable) and shared memory
// (the SQLite files' -shm maps).
func processRSS(b *testing.B, pid int) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Skipf("no /proc to read the RSS from: %v", err)
	}
	kb := map[string]float64{}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[0], "Rss") || len(f) >= 2 && f[0] == "VmRSS:" {
			kb[strings.TrimSuffix(f[0], ":")], _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if _, ok := kb["VmRSS"]; !ok {
		b.Fatalf("/proc/%d/status has no VmRSS", pid)
	}
	b.Logf("RSS %.0f MB: anonymous %.0f MB, file %.0f MB, shared memory %.0f MB",
		kb["VmRSS"]/1024, kb["RssAnon"]/1024, kb["RssFile"]/1024, kb["RssShmem"]/1024)
	return kb["VmRSS"] / 1024
}

// processCPU reads the CPU time, user and system, process pid has spent, in seconds (its threads'
// included: a process started in this one is its own; one inside it includes the benchmark's).
func processCPU(b *testing.B, pid int) float64 {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skipf("no /proc to read the CPU time from: %v", err)
	}
	// The fields after the command's name, which is in parentheses and may hold spaces: utime and
	// stime are the 12th and 13th of them, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}
