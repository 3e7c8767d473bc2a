package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// mur export writes files for another machine: it never connects to the databases the roster names
// (mur check does), so a database that is not reachable from here, or answers nothing, costs nothing.
func TestExportConnectsToNoDatabase(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			defer c.Close() // held open, never answered: a check would wait its whole timeout
		}
	}()
	dir := t.TempDir()
	copyDir(t, helloDir, dir)
	rosterPath := filepath.Join(dir, "roster.yaml")
	b, _ := os.ReadFile(rosterPath)
	body := strings.Replace(string(b), "    capsule: ./lead\n",
		"    capsule: ./lead\n    store: postgres://murmur@"+ln.Addr().String()+"/lead\n    replicas: 2\n", 1)
	os.WriteFile(rosterPath, []byte(body), 0o644)
	env := envOf(map[string]string{"MUR_FORMATION_TOKEN": "fm", "MUR_OPERATOR_TOKEN": "op"})
	for _, format := range []string{"compose", "k8s"} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), []string{"export", format, "--roster", rosterPath}, env, &out, &errb); err != nil {
			t.Fatalf("export %s: %v\n%s", format, err, errb.String())
		}
		if strings.Contains(errb.String(), "E-STORE") {
			t.Errorf("export %s reports on the database: %s", format, errb.String())
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("mur export connected to the roster's database %d time(s)", n)
	}
}
