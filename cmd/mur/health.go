package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// cmdHealth asks a door whether it is ready (GET /readyz): exit 0 when it answers 200, 1 otherwise. It
// is the health check of the mur image, which has no curl.
func cmdHealth(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("health", "mur health [--door URL] [--timeout D]", stderr)
	door := fs.String("door", "", "the door's base URL (default: http://127.0.0.1:PORT, PORT from MUR_LISTEN)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	base := strings.TrimRight(*door, "/")
	if base == "" {
		listen := getenv("MUR_LISTEN")
		_, port, err := net.SplitHostPort(listen)
		if err != nil || port == "" || port == "0" {
			return usagef("give --door URL, or set MUR_LISTEN to the door's host:port")
		}
		base = "http://" + net.JoinHostPort("127.0.0.1", port)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	if err != nil {
		return usagef("--door %q: %v", *door, err)
	}
	// No proxy from the environment: the door is this host's (or this container's) own.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "not ready: %v\n", err)
		return errReported{1}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	text := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "not ready: %s answered %s: %s\n", base+"/readyz", resp.Status, text)
		return errReported{1}
	}
	fmt.Fprintln(stdout, text)
	return nil
}
