package harness

import (
	"errors"
	"io"
	"sync"
	"syscall"
)

// stdout is a harness run's stdout as the runner reads it, parsed in the run's dialect one chunk at a
// time: a chunk is handed to the parser, and the next is read only once every complete line of it has
// been parsed and its events emitted. Sync uses that to make a tool call wait for what the harness wrote
// before it (SPEC: session-status's turns.used is the turns the harness has closed): a harness writes its
// events, then calls a tool, so at the call its events are in the pipe or already read.
//
// The sandbox copies the harness's pipe into stdout with io.Copy, which hands ReadFrom the pipe itself;
// stdout then reads the pipe's descriptor directly, and Sync drains it. Any other source (a test's
// starter) is read through Write, and Sync has nothing to drain: what was written is parsed already.
type stdout struct {
	emit func(Event)
	done chan struct{} // closed once the parser has read the stream to its end

	// syncMu lets one reader at a time take bytes from the pipe and hand them to the parser: the copying
	// goroutine's reads, Write, and Sync's drain. It guards rc.
	syncMu sync.Mutex
	rc     syscall.RawConn // the pipe, once ReadFrom was handed it

	// mu guards the hand-over to the parser below; cond signals a change of any of them.
	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte // handed over, not yet read by the parser
	waiting bool   // the parser is asking for more: every complete line handed over is parsed
	eof     bool   // the stream ended
	parsed  bool   // the parser has returned
}

var (
	_ io.Writer     = (*stdout)(nil)
	_ io.ReaderFrom = (*stdout)(nil)
)

// newStdout starts the parser of one run's stdout in dialect d, which hands every event to emit in
// order, on its own goroutine; done closes once Close was called and everything before it is parsed.
func newStdout(d Dialect, emit func(Event)) *stdout {
	s := &stdout{emit: emit, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	go func() {
		defer close(s.done)
		_ = Read(parserSide{s}, d, emit) // parserSide ends with io.EOF only, which Read returns as nil
		s.mu.Lock()
		s.parsed = true
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	return s
}

// parserSide is the reading end the parser is given.
type parserSide struct{ s *stdout }

// Read hands the parser what was handed over. The parser asks for more only once it has parsed every
// complete line it holds, which is what deliver waits for.
func (p parserSide) Read(b []byte) (int, error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.buf) == 0 && !s.eof {
		s.waiting = true
		s.cond.Broadcast()
		s.cond.Wait()
	}
	s.waiting = false
	if len(s.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(b, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// deliver hands b to the parser and returns once the parser has emitted the events of its complete
// lines (or has returned).
func (s *stdout) deliver(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parsed || s.eof {
		return
	}
	s.buf = append(s.buf, b...)
	s.cond.Broadcast()
	for !s.parsed && !(s.waiting && len(s.buf) == 0) {
		s.cond.Wait()
	}
}

// Write hands b to the parser and returns once it is parsed.
func (s *stdout) Write(b []byte) (int, error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.deliver(b)
	return len(b), nil
}

// ReadFrom reads src to its end. When src is a pipe (the sandbox's copy of the harness's stdout), it
// reads the pipe's descriptor itself, so that Sync can drain it too.
func (s *stdout) ReadFrom(src io.Reader) (int64, error) {
	sc, ok := src.(syscall.Conn)
	var rc syscall.RawConn
	if ok {
		var err error
		if rc, err = sc.SyscallConn(); err != nil {
			ok = false
		}
	}
	if !ok {
		return io.Copy(writerOnly{s}, src)
	}
	s.syncMu.Lock()
	s.rc = rc
	s.syncMu.Unlock()
	buf := make([]byte, 32<<10)
	var total int64
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			s.syncMu.Lock()
			defer s.syncMu.Unlock()
			n, rerr = syscall.Read(int(fd), buf)
			if errors.Is(rerr, syscall.EAGAIN) {
				return false
			}
			if n > 0 {
				s.deliver(buf[:n])
			}
			return true
		})
		switch {
		case err != nil:
			return total, err
		case errors.Is(rerr, syscall.EINTR):
			continue
		case rerr != nil:
			return total, rerr
		case n <= 0:
			return total, nil
		}
		total += int64(n)
	}
}

// Sync returns once everything the harness has written so far is parsed and its events emitted.
func (s *stdout) Sync() {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.rc == nil {
		return
	}
	buf := make([]byte, 32<<10)
	// Control fails only once the pipe is closed, after ReadFrom delivered all it read: nothing to drain.
	_ = s.rc.Control(func(fd uintptr) {
		for {
			n, err := syscall.Read(int(fd), buf)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || n <= 0 {
				return
			}
			s.deliver(buf[:n])
		}
	})
}

// Close ends the stream: the parser reads what is left and returns.
func (s *stdout) Close() {
	s.mu.Lock()
	s.eof = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// writerOnly hides ReadFrom, so io.Copy does not call it again.
type writerOnly struct{ io.Writer }
