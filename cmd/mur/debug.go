package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// checkDebugAddr accepts the address of --debug-listen: a loopback address with a port. Profiles show
// what a member is doing (and pprof can slow it down), so they are never offered beyond this host.
func checkDebugAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--debug-listen %q: give a loopback address such as 127.0.0.1:6060", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return usagef("--debug-listen %q: profiles are served on loopback only; use 127.0.0.1:PORT or [::1]:PORT", addr)
	}
	return nil
}

// debugServer serves net/http/pprof under /debug/pprof/ on its own listener.
type debugServer struct {
	url string
	srv *http.Server
}

func startDebug(addr string, log *slog.Logger) (*debugServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-listen %s: %w (choose another port, or leave --debug-listen out)", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	d := &debugServer{url: "http://" + ln.Addr().String() + "/debug/pprof/", srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		// Serve ends with ErrServerClosed when stop shuts it down; anything else means the profiles are
		// gone while the formation runs on.
		if err := d.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Warn("the profiles stopped serving", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return d, nil
}

func (d *debugServer) stop() error {
	if d == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := d.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return d.srv.Close()
	}
	return nil
}
