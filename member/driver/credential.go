package driver

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ResolveCredential produces the value of a credential reference of murmur.yaml: env:NAME reads the
// environment variable NAME, file:PATH the first line of the file. The value itself never appears in an
// error, a log line or a record; errors name only the reference.
func ResolveCredential(ref string, getenv func(string) string) (string, error) {
	kind, arg, ok := strings.Cut(ref, ":")
	if !ok || arg == "" || (kind != "env" && kind != "file") {
		// The reference itself may be a pasted key: never repeat it.
		return "", errors.New("credential is not env:NAME or file:PATH (its value is not shown); name where the key is, such as env:OPENAI_API_KEY")
	}
	switch kind {
	case "env":
		v := strings.TrimSpace(getenv(arg))
		if v == "" {
			return "", fmt.Errorf("credential env:%s: the environment variable %s is not set; export it before starting mur", arg, arg)
		}
		return v, nil
	default: // file
		b, err := os.ReadFile(arg)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return "", fmt.Errorf("credential file:%s: no such file; write the key to it (mode 0600)", arg)
			}
			return "", fmt.Errorf("credential file:%s: cannot be read: %v", arg, errors.Unwrap(err))
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if v := strings.TrimSpace(line); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("credential file:%s is empty; write the key to its first line", arg)
	}
}
