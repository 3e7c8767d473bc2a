package mcpconfig

import (
	"encoding/json"
	"strings"
)

// Server is one entry of mcpServers: its URL and the bearer token of its Authorization header.
type Server struct {
	URL   string
	Token string
}

// Encode is the content of an MCP config naming one server, name, reached over HTTP at url with token as
// its Authorization header. The entry sets alwaysLoad: Claude Code (2.1 and later) otherwise defers an MCP
// server's tools behind its tool search, which costs a model call a run before the session's tools are
// reached; harnesses that do not know the key ignore it.
func Encode(name, url, token string) []byte {
	cfg := map[string]any{"mcpServers": map[string]any{name: map[string]any{
		"type": "http", "url": url, "headers": map[string]string{"Authorization": "Bearer " + token},
		"alwaysLoad": true}}}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return append(b, '\n')
}

// Servers reads the mcpServers of an MCP config file's content, by name.
func Servers(b []byte) (map[string]Server, error) {
	var cfg struct {
		MCPServers map[string]struct {
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, err
	}
	servers := make(map[string]Server, len(cfg.MCPServers))
	for name, s := range cfg.MCPServers {
		servers[name] = Server{URL: s.URL, Token: strings.TrimPrefix(s.Headers["Authorization"], "Bearer ")}
	}
	return servers, nil
}
