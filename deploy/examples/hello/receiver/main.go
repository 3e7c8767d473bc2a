// Command receiver is the hello example's push webhook: it prints a line for each task change a member
// posts to it, the notification token and the task's state, and answers 204.
//
//	go run ./deploy/examples/hello/receiver                    # listens on 127.0.0.1:9000
//	go run ./deploy/examples/hello/receiver -listen 127.0.0.1:9100
//
// Then send a task with a push config (docs/push.md); lead's murmur.yaml allows webhooks on 127.0.0.1.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
}

// post is what a member posts: {"task": …}, of which the receiver prints a few fields.
type post struct {
	Task struct {
		ID     string `json:"id"`
		Status struct {
			State   string `json:"state"`
			Message *struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"message"`
		} `json:"status"`
	} `json:"task"`
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("receiver", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9000", "the address to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("%w (another receiver running? pass -listen 127.0.0.1:PORT)", err)
	}
	fmt.Fprintf(stdout, "receiving on http://%s/hook\n", ln.Addr())
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST a task change here", http.StatusMethodNotAllowed)
			return
		}
		var p post
		if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&p); err != nil || p.Task.ID == "" {
			http.Error(w, `the body is not {"task": …}`, http.StatusBadRequest)
			return
		}
		line := fmt.Sprintf("%s %s %s", orDash(r.Header.Get("A2A-Notification-Token")), p.Task.ID, p.Task.Status.State)
		if m := p.Task.Status.Message; m != nil && len(m.Parts) > 0 && m.Parts[0].Text != "" {
			line += ": " + m.Parts[0].Text
		}
		fmt.Fprintln(stdout, line)
		w.WriteHeader(http.StatusNoContent)
	})}
	shutdown := make(chan error, 1)
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shutdown <- srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	// Serve returns as soon as Shutdown begins; the posts being answered end within its timeout.
	return <-shutdown
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
