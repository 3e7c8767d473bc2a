package roster_test

import (
	"testing"

	"github.com/murmur-run/murmur/roster"
)

func TestEgressAllowed(t *testing.T) {
	tests := []struct {
		url   string
		allow []string
		want  bool
	}{
		{"http://127.0.0.1:7101", []string{"localhost"}, true},
		{"http://127.5.5.5:7101", []string{"localhost"}, true},
		{"http://localhost:7101", []string{"localhost"}, true},
		{"http://LocalHost:7101", []string{"localhost"}, true},
		{"http://localhost.:7101", []string{"localhost"}, true},
		{"http://[::1]:7101", []string{"localhost"}, true},
		{"http://[::ffff:127.0.0.1]:7101", []string{"localhost"}, true},
		{"http://127.0.0.1:7101", []string{"LOCALHOST"}, true},
		{"http://127.0.0.1:7101", []string{"127.0.0.1"}, true},
		{"http://127.5.5.5:7101", []string{"127.0.0.1"}, false},
		{"http://localhost:7101", []string{"127.0.0.1"}, false},
		{"http://[::1]:7101", []string{"::1"}, true},
		{"http://[::1]:7101", []string{"[::1]"}, true},
		{"http://[::1]:7101", []string{"[::1]:7101"}, true},
		{"http://[::1]:7101", []string{"[::1]:7102"}, false},
		{"http://[0:0:0:0:0:0:0:1]:7101", []string{"::1"}, true},
		{"http://10.0.0.8:7101", []string{"localhost"}, false},
		{"http://worker:7101", []string{"localhost"}, false},
		{"http://worker:7101", []string{"Worker"}, true},
		{"http://worker.example.com:7101", []string{"example.com"}, false},
		{"http://worker:7101", []string{"localhost", "worker"}, true},
		{"http://worker:7101", []string{"worker:7101"}, true},
		{"http://worker:7101", []string{"worker:7102"}, false},
		{"http://worker", []string{"worker:80"}, true},
		{"https://worker", []string{"worker:443"}, true},
		{"https://worker", []string{"worker:80"}, false},
		{"http://localhost:7101", []string{"localhost:7101"}, true},
		{"http://127.0.0.1:7101", []string{"localhost:7102"}, false},
		{"http://anything.example:1", []string{"*"}, true},
		{"http://127.0.0.1:7101", nil, false},
		{"http://127.0.0.1:7101", []string{""}, false},
		{"", []string{"*"}, false},
		{"not a url", []string{"*"}, false},
		{"127.0.0.1:7101", []string{"*"}, false},
		{"localhost:7101", []string{"localhost"}, false},
		{"http://:7101", []string{"*"}, false},
		{"http://%zz", []string{"*"}, false},
		{"/a2a", []string{"*"}, false},
	}
	for _, tt := range tests {
		if got := roster.EgressAllowed(tt.url, tt.allow); got != tt.want {
			t.Errorf("EgressAllowed(%q, %q) = %v, want %v", tt.url, tt.allow, got, tt.want)
		}
	}
}
