package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"
)

// The channel: the manager tells the supervisor the job's attempts (POST /tell) and
// reads where its rank is (GET /state, held open until something changes). Every request
// and every answer carries an HMAC-SHA256 of itself under the pod's key, bound to the pod's
// name and the request's nonce: a pod of another job (another key), a process in this pod
// (the key is in no file and in no environment it can read) or one that takes the port
// after the supervisor is gone can neither tell an attempt nor forge an answer.
const (
	keyBytes    = 32
	bodyLimit   = 4 << 10
	longestWait = 30 * time.Second
	slots       = 16 // requests served at once; more are refused, not queued
)

type channel struct {
	key   []byte
	pod   string
	s     *supervisor
	slots chan struct{}
}

// listen serves the channel on --listen with the key, for supervisor s.
func listen(opts options, key string, s *supervisor) (*channel, error) {
	k, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil || len(k) < keyBytes {
		return nil, errors.New(keyEnv + " holds no key of 32 bytes (base64url, unpadded)")
	}
	// nothing of this process (its memory, its /proc/self/environ) is readable by the
	// child, though it runs as the same user: the key stays the supervisor's
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return nil, errno
	}
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return nil, err
	}
	if _, port, _ := net.SplitHostPort(opts.listen); port == "0" {
		// the system chose the port: said once, for whoever started the supervisor
		fmt.Fprintf(os.Stderr, "%s: channel on %s\n", name, ln.Addr())
	}
	c := &channel{key: k, pod: opts.pod, s: s, slots: make(chan struct{}, slots)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tell", c.tell)
	mux.HandleFunc("GET /state", c.state)
	srv := &http.Server{Handler: c.bounded(mux), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: longestWait + 10*time.Second,
		IdleTimeout: 2 * longestWait, MaxHeaderBytes: 8 << 10}
	// connections are not capped: a cap is what a flood would fill first, ahead of the
	// manager; each is dropped 5 s after it opens without a request (its goroutine and
	// descriptor with it), and the process's descriptors are the kernel's bound
	go func() { _ = srv.Serve(ln) }()
	return c, nil
}

// bounded serves at most `slots` requests at once.
func (c *channel) bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case c.slots <- struct{}{}:
			defer func() { <-c.slots }()
			next.ServeHTTP(w, r)
		default:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
	})
}

// mac is the HMAC of parts, each framed by its length: no two lists of parts share one.
func (c *channel) mac(parts ...string) []byte {
	h := hmac.New(sha256.New, c.key)
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p)) + ":" + p))
	}
	return h.Sum(nil)
}

// verify reads the request's body (bounded) and checks its MAC; the nonce it carries binds
// the answer.
func (c *channel) verify(w http.ResponseWriter, r *http.Request) ([]byte, string, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, bodyLimit))
	nonce := r.Header.Get("X-Trainop-Nonce")
	got, macErr := hex.DecodeString(r.Header.Get("X-Trainop-Mac"))
	if err != nil || macErr != nil || len(nonce) < 16 || len(nonce) > 64 ||
		!hmac.Equal(got, c.mac("request", r.Method, r.URL.Path, r.URL.RawQuery, c.pod, nonce,
			string(body))) {
		w.Header().Set("Connection", "close") // nothing more from whoever that is
		http.Error(w, "not authenticated", http.StatusUnauthorized)
		return nil, "", false
	}
	c.s.mu.Lock()
	c.s.heard = time.Now()
	c.s.noteHeard(true) // before the request acts: the agent defers from now on
	c.s.mu.Unlock()
	return body, nonce, true
}

// answer writes the rank's state, with its MAC under the request's nonce.
func (c *channel) answer(w http.ResponseWriter, nonce string, st snapshot) {
	body, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Trainop-Mac", hex.EncodeToString(c.mac("answer", c.pod, nonce,
		string(body))))
	_, _ = w.Write(body)
}

// snapshot is the rank's state as the channel says it.
type snapshot struct {
	Pod     string `json:"pod"`
	Seq     uint64 `json:"seq"`
	Phase   string `json:"phase"`
	Attempt int    `json:"attempt"`
	Told    told   `json:"told"`
	Last    *ended `json:"last"`
	// the rank's latest progress report, or why it could not be read (progress.go)
	Progress        json.RawMessage `json:"progress,omitempty"`
	ProgressProblem string          `json:"progressProblem,omitempty"`
}

func (s *supervisor) snapshot(pod string) snapshot {
	return snapshot{Pod: pod, Seq: s.seq, Phase: s.phase, Attempt: s.attempt, Told: s.told,
		Last: s.last, Progress: s.progressNow.doc, ProgressProblem: s.progressNow.problem}
}

func (c *channel) tell(w http.ResponseWriter, r *http.Request) {
	body, nonce, ok := c.verify(w, r)
	if !ok {
		return
	}
	var t told
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if dec.Decode(&t) != nil || dec.More() || t.Attempt < 0 || t.Attempt > mostAttempts ||
		t.Released < 0 || t.Released > t.Attempt {
		http.Error(w, "not a tell", http.StatusBadRequest)
		return
	}
	s := c.s
	s.mu.Lock()
	if t.newer(s.told) {
		s.told = t
		s.bump()
		s.act()
	}
	st := s.snapshot(c.pod)
	s.mu.Unlock()
	c.answer(w, nonce, st)
}

// state answers once the state is newer than ?after=SEQ, or after ?wait=MS (at most 30 s).
func (c *channel) state(w http.ResponseWriter, r *http.Request) {
	_, nonce, ok := c.verify(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	after, err1 := strconv.ParseUint(q.Get("after"), 10, 64)
	wait, err2 := strconv.ParseUint(q.Get("wait"), 10, 32)
	if err1 != nil || err2 != nil {
		http.Error(w, "after and wait: whole numbers", http.StatusBadRequest)
		return
	}
	timer := time.NewTimer(min(time.Duration(wait)*time.Millisecond, longestWait))
	defer timer.Stop()
	s := c.s
	for {
		s.mu.Lock()
		st, changed := s.snapshot(c.pod), s.changed
		s.mu.Unlock()
		if st.Seq > after {
			c.answer(w, nonce, st)
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			c.answer(w, nonce, st)
			return
		case <-r.Context().Done():
			return
		}
	}
}
