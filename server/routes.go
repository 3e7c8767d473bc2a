package server

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes is the whole HTTP surface of a door (DESIGN §5).
func (d *Door) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	// POST /a2a is served before the router (Door.ServeHTTP); these routes stay for what is served
	// through the router alone, and so that another method on /a2a is answered 405, not 404.
	r.Post("/a2a", d.serveJSONRPC)
	r.Post("/a2a/", d.serveJSONRPC)
	r.Post("/control", d.serveControl)
	r.Get("/.well-known/agent-card.json", d.serveCard)
	r.Get("/peer-files/{handle}", d.servePeerFile)
	r.Get("/tasks/{id}/artifacts/*", d.serveArtifact)
	r.Get("/healthz", serveHealthz)
	r.Get("/readyz", d.serveReadyz)
	r.Get("/replicas", d.serveReplicas)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(d.cfg.Gatherer, promhttp.HandlerOpts{}))
	return r
}

func serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

func (d *Door) serveReadyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := d.cfg.Executor.Ping(r.Context()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready: " + err.Error() + "\n"))
		return
	}
	w.Write([]byte("ready\n"))
}
