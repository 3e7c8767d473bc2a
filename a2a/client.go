package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/sourcegraph/jsonrpc2"
)

// Client calls one door's JSON-RPC interface. It is safe for concurrent use.
type Client struct {
	url   string
	token string
	http  *http.Client
	next  atomic.Uint64
}

// maxResponseBytes bounds what the client reads of one response.
const maxResponseBytes = 64 << 20

// NewClient returns a client for the JSON-RPC interface at url that sends token as its bearer
// credential. A nil hc means http.DefaultClient.
func NewClient(url, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{url: url, token: token, http: hc}
}

// URL returns the interface URL the client posts to.
func (c *Client) URL() string { return c.url }

// SendMessage sends a message and returns the task or message the door answered with.
func (c *Client) SendMessage(ctx context.Context, req *SendMessageRequest) (*SendMessageResponse, error) {
	var out SendMessageResponse
	if err := c.Call(ctx, MethodSendMessage, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetTask reads a task.
func (c *Client) GetTask(ctx context.Context, req *GetTaskRequest) (*Task, error) {
	var out Task
	if err := c.Call(ctx, MethodGetTask, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTasks reads one page of tasks.
func (c *Client) ListTasks(ctx context.Context, req *ListTasksRequest) (*ListTasksResponse, error) {
	var out ListTasksResponse
	if err := c.Call(ctx, MethodListTasks, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelTask asks the door to cancel a task and returns the task as it then stands.
func (c *Client) CancelTask(ctx context.Context, req *CancelTaskRequest) (*Task, error) {
	var out Task
	if err := c.Call(ctx, MethodCancelTask, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Call makes one JSON-RPC call. A JSON-RPC error comes back as an *Error; a transport failure or an
// answer that is not JSON-RPC comes back as a plain error naming the door's URL.
func (c *Client) Call(ctx context.Context, method Method, params, result any) error {
	req := &jsonrpc2.Request{Method: string(method), ID: jsonrpc2.ID{Num: c.next.Add(1)}}
	if err := req.SetParams(params); err != nil {
		return fmt.Errorf("encode %s params: %w", method, err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s request: %w", method, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("door %s: %w", c.url, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set(HeaderVersion, ProtocolVersion)
	if c.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("door %s unreachable: %w", c.url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("door %s: reading the answer: %w", c.url, err)
	}
	var rpc jsonrpc2.Response
	if err := json.Unmarshal(raw, &rpc); err != nil {
		return fmt.Errorf("door %s answered HTTP %d with something that is not JSON-RPC: %s", c.url, resp.StatusCode, snippet(raw))
	}
	if rpc.Error != nil {
		return FromJSONRPC(rpc.Error)
	}
	if rpc.Result == nil {
		return fmt.Errorf("door %s answered %s with neither result nor error", c.url, method)
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(*rpc.Result, result); err != nil {
		return fmt.Errorf("door %s: decoding the %s result: %w", c.url, method, err)
	}
	return nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}
