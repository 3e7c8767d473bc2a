package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// `mur member --debug-listen 127.0.0.1:0` prints where its profiles are, and serves net/http/pprof there.
func TestDebugListenServesProfiles(t *testing.T) {
	rosterPath, _, dataDir := soloFormation(t, "debug", groupCapsule)
	m := startMemberFlags(t, rosterPath, dataDir, []string{"--debug-listen", "127.0.0.1:0"})
	var url string
	select {
	case url = <-m.profiles:
	case <-time.After(60 * time.Second):
		t.Fatal("the member printed no profiles URL")
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/debug/pprof/") {
		t.Fatalf("profiles at %q, want http://127.0.0.1:PORT/debug/pprof/", url)
	}
	resp, err := http.Get(url + "goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile:") {
		t.Errorf("GET %sgoroutine: %d %.200s", url, resp.StatusCode, body)
	}
}
