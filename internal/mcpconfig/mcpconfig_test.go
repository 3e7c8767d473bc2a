package mcpconfig

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The config is the shape Claude Code's --mcp-config reads, with the server's tools loaded up front
// (alwaysLoad), and reads back as it was written.
func TestEncode(t *testing.T) {
	b := Encode("murmur", "http://127.0.0.1:4242/mcp", "tok")
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"mcpServers": map[string]any{"murmur": map[string]any{
		"type": "http", "url": "http://127.0.0.1:4242/mcp", "headers": map[string]any{"Authorization": "Bearer tok"},
		"alwaysLoad": true}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	servers, err := Servers(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]Server{"murmur": {URL: "http://127.0.0.1:4242/mcp", Token: "tok"}}, servers); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
}
