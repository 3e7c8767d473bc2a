package harness

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"testing"
)

// Sync returns only once every line written to the harness's pipe so far is parsed and its events
// emitted, with the pipe copied into stdout by io.Copy as the sandbox does; after the pipe ends the
// parser is done and nothing is lost.
func TestStdoutSyncDrainsThePipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var turns atomic.Int64
	out := newStdout(MurmurJSONL, func(e Event) {
		if e.Kind == KindTurn {
			turns.Add(1)
		}
	})
	copied := make(chan struct{})
	go func() {
		io.Copy(out, r)
		r.Close()
		close(copied)
	}()
	// The copy has begun reading the pipe (as it has long before a started harness can call a tool).
	for ready := false; !ready; {
		out.syncMu.Lock()
		ready = out.rc != nil
		out.syncMu.Unlock()
	}
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(w, `{"type":"turn","usage":{"input":%d,"output":1}}`+"\n", i)
		out.Sync()
		if got := turns.Load(); got != int64(i) {
			t.Fatalf("after %d lines and Sync, %d turns emitted", i, got)
		}
	}
	fmt.Fprintf(w, `{"type":"answer","text":"done"}`)
	w.Close()
	<-copied
	out.Close()
	<-out.done
	out.Sync() // after the run: nothing to drain, and it does not block
	if got := turns.Load(); got != 200 {
		t.Errorf("%d turns at the end", got)
	}
}
