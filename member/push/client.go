package push

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
)

// NewClient is the HTTP client webhooks are posted with: each address a URL resolves to is checked
// against allow when it connects, a post is bounded by timeout, and a redirect is not followed (it
// could lead anywhere: the webhook's own URL is the one that was allowed).
func NewClient(allow Allowlist, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		DialContext:           allow.dialer(&net.Dialer{Timeout: timeout}),
		MaxIdleConnsPerHost:   PerCaller,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Post sends body to c's URL with client, with c's token (A2A-Notification-Token) and authentication
// (Authorization), and the trace context of ctx (traceparent, tracestate, baggage) when it has one; an
// answer other than 2xx is an error naming its status.
func Post(ctx context.Context, client *http.Client, c a2a.TaskPushNotificationConfig, body []byte) error {
	_, err := post(ctx, client, c, body)
	return err
}

// post is Post, which also returns the answer's status code (0 when none came).
func post(ctx context.Context, client *http.Client, c a2a.TaskPushNotificationConfig, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if trace.SpanContextFromContext(ctx).IsValid() || baggage.FromContext(ctx).Len() > 0 {
		conv.Propagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("A2A-Notification-Token", c.Token)
		req.Header.Set("X-A2A-Notification-Token", c.Token)
	}
	if a := c.Authentication; a != nil && a.Credentials != "" {
		req.Header.Set("Authorization", strings.TrimSpace(a.Scheme+" "+a.Credentials))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	// Drained so the connection is used again; a body that cannot be read changes nothing: the status decides.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the webhook answered HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}
