package harness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// auditPolicy logs one line per request when its response completes, with
// who made it; nothing of the bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
`

// AuditArgs writes an audit policy into dir and returns the
// kube-apiserver flags (Options.APIServerArgs) that log every request, one
// JSON line each, to the returned path, flushed every second.
func AuditArgs(dir string) (args []string, log string, err error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, "", err
	}
	log = filepath.Join(dir, "audit.log")
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + log,
		"--audit-log-format=json",
		"--audit-log-maxsize=0",
		"--audit-log-mode=batch",
		"--audit-log-batch-max-wait=1s",
	}, log, nil
}

// AuditEvent is the part of an audit.k8s.io/v1 Event the tests read.
type AuditEvent struct {
	Stage     string    `json:"stage"`
	Verb      string    `json:"verb"`
	UserAgent string    `json:"userAgent"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// Kind is "VERB RESOURCE[.GROUP][/SUBRESOURCE]".
func (e *AuditEvent) Kind() string {
	kind := e.Verb
	if r := e.ObjectRef; r != nil {
		res := r.Resource
		if r.APIGroup != "" {
			res += "." + r.APIGroup
		}
		if r.Subresource != "" {
			res += "/" + r.Subresource
		}
		kind += " " + res
	}
	return kind
}

// ReadAudit calls each with every completed request in the audit log at
// path, in the order logged. A last line without its newline is one the
// API server is still writing (its batch backend flushes while tests
// read): it is left for the next read, not reported as bad JSON.
func ReadAudit(path string, each func(*AuditEvent)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil // line, if any, is unfinished
		}
		if err != nil {
			return err
		}
		var e AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if e.Stage == "ResponseComplete" {
			each(&e)
		}
	}
}
