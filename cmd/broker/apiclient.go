package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
)

// The client subcommands (broker events, broker storage, ...) talk to a
// running broker's native HTTP API. This file holds what they share: the
// --server, --output and --timeout flags, the HTTP client, the mapping of
// API errors to exit codes, and the progress bar.
//
// Exit codes of the client subcommands (besides exitOK, exitFailure and
// exitUsage of main.go):
const (
	exitNotFound    = 3 // the store, stream, queue or message does not exist
	exitConflict    = 4 // wrong expected revision, idempotency conflict, target exists
	exitUnavailable = 6 // the broker cannot be reached, is stopping, or its store failed
	exitDamaged     = 7 // storage verify found damaged data
)

// clientExitCodes documents the exit codes in --help.
const clientExitCodes = "Exit codes: 0 ok, 1 error, 2 usage (nothing was sent), 3 not found, 4 conflict,\n" +
	"6 broker unreachable or unavailable."

const (
	serverFlag       = "server"
	outputFlag       = "output"
	timeoutFlag      = "timeout"
	userFlag         = "user"
	passwordFileFlag = "password-file"
	tokenFileFlag    = "token-file"
)

// clientTokenFileEnv names a file holding a JWT the HTTP client
// subcommands send as Authorization: Bearer (--token-file).
const clientTokenFileEnv = "BROKER_CLIENT_TOKEN_FILE"

// clientTokenEnv holds the JWT itself when no file does (as
// BROKER_CLIENT_SASL_PASSWORD beside its file). There is no --password or
// --token flag: a secret in the arguments is visible to every user of the
// machine (ps) and stays in the shell's history.
const clientTokenEnv = "BROKER_CLIENT_TOKEN"

// clientFlags are the flags of every client subcommand.
func clientFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:    serverFlag,
			Usage:   "URL (or host:port) of the broker's HTTP listener",
			Value:   "http://localhost:8080",
			EnvVars: []string{"BROKER_HTTP_ADDR"},
		},
		&cli.StringFlag{Name: outputFlag, Aliases: []string{"o"}, Usage: "output format: table or json", Value: "table"},
		&cli.DurationFlag{Name: timeoutFlag, Usage: "give up on a request after this long", Value: 30 * time.Second},
		// Credentials for http-auth required: the users and variables of
		// the Kafka commands' SASL settings, so one set serves both.
		&cli.StringFlag{Name: userFlag, Usage: "broker user for HTTP Basic authentication (http-auth required)", EnvVars: []string{clientSecurityEnv["sasl-user"]}},
		&cli.StringFlag{Name: passwordFileFlag, Usage: "file holding the password of --user (else " + clientPasswordEnv + ")", EnvVars: []string{clientSecurityEnv["sasl-password-file"]}},
		&cli.StringFlag{Name: tokenFileFlag, Usage: "file holding a JWT sent as Authorization: Bearer (instead of --user; else " + clientTokenEnv + ")", EnvVars: []string{clientTokenFileEnv}},
	}
}

// clientCredentials sets the request's Authorization from --user and its
// password, or --token-file, or the token in BROKER_CLIENT_TOKEN. Nothing
// when none is given.
func clientCredentials(cCtx *cli.Context) (func(*http.Request), error) {
	user, tokenFile := cCtx.String(userFlag), cCtx.String(tokenFileFlag)
	switch {
	case user != "" && tokenFile != "":
		return nil, usageErrorf("give --user or --token-file, not both")
	case user == "" && tokenFile == "" && os.Getenv(clientTokenEnv) != "":
		token := strings.TrimSpace(os.Getenv(clientTokenEnv))
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, nil
	case tokenFile != "":
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, usageErrorf("--token-file: %v", err)
		}
		token := strings.TrimSpace(string(b))
		if token == "" {
			return nil, usageErrorf("--token-file %s is empty", tokenFile)
		}
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, nil
	case user != "":
		password := os.Getenv(clientPasswordEnv)
		if f := cCtx.String(passwordFileFlag); f != "" {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, usageErrorf("--password-file: %v", err)
			}
			password = strings.TrimRight(string(b), "\r\n")
		}
		if password == "" {
			return nil, usageErrorf("--user %s has no password: give --password-file or set %s", user, clientPasswordEnv)
		}
		return func(r *http.Request) { r.SetBasicAuth(user, password) }, nil
	}
	return nil, nil
}

// outputFormat returns the --output value, checked.
func outputFormat(cCtx *cli.Context) (string, error) {
	switch o := cCtx.String(outputFlag); o {
	case "table", "json":
		return o, nil
	default:
		return "", usageErrorf("--output %q is not table or json", o)
	}
}

// apiClient calls the native HTTP API.
type apiClient struct {
	base    *url.URL
	http    *http.Client
	timeout time.Duration
	// authorize adds the credentials (nil without any).
	authorize func(*http.Request)
}

// newAPIClient builds the client from --server and --timeout.
func newAPIClient(cCtx *cli.Context) (*apiClient, error) {
	raw := cCtx.String(serverFlag)
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, usageErrorf("--server %q is not an http(s) URL or host:port, e.g. http://localhost:8080", cCtx.String(serverFlag))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	authorize, err := clientCredentials(cCtx)
	if err != nil {
		return nil, err
	}
	client := &http.Client{}
	if u.Scheme == "https" {
		cfg, err := apiTLSConfig()
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
		client.Transport = &http.Transport{TLSClientConfig: cfg, Proxy: http.ProxyFromEnvironment}
	}
	return &apiClient{base: u, http: client, timeout: cCtx.Duration(timeoutFlag), authorize: authorize}, nil
}

// apiTLSConfig is the HTTPS client's TLS: the broker's certificate is
// checked against BROKER_CLIENT_TLS_CA_FILE when set (else the system
// roots), and BROKER_CLIENT_TLS_CERT_FILE/KEY_FILE are presented
// (ssl-client-auth) — the variables of the Kafka commands.
func apiTLSConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := os.Getenv(clientSecurityEnv["tls-ca-file"]); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", clientSecurityEnv["tls-ca-file"], err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s holds no PEM certificate", clientSecurityEnv["tls-ca-file"], ca)
		}
	}
	if cert := os.Getenv(clientSecurityEnv["tls-cert-file"]); cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, os.Getenv(clientSecurityEnv["tls-key-file"]))
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %v", clientSecurityEnv["tls-cert-file"], clientSecurityEnv["tls-key-file"], err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// outputAndClient returns the checked --output and the client of
// --server and --timeout.
func outputAndClient(cCtx *cli.Context) (string, *apiClient, error) {
	format, err := outputFormat(cCtx)
	if err != nil {
		return "", nil, err
	}
	c, err := newAPIClient(cCtx)
	if err != nil {
		return "", nil, err
	}
	return format, c, nil
}

// apiError is an error answer of the API.
type apiError struct {
	Status  int
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

func (e *apiError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("the broker answered %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Status == http.StatusUnauthorized {
		return fmt.Sprintf("%s: %s (give --user with --password-file or %s, or --token-file)", e.Code, e.Message, clientPasswordEnv)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// ExitCode maps the HTTP status to the exit code.
func (e *apiError) ExitCode() int {
	switch {
	case e.Status == http.StatusNotFound:
		return exitNotFound
	case e.Status == http.StatusConflict:
		return exitConflict
	case e.Status == http.StatusServiceUnavailable, e.Status == http.StatusInsufficientStorage:
		return exitUnavailable
	}
	return exitFailure
}

// url returns the API URL of path (its segments already escaped with
// url.PathEscape) with query.
func (c *apiClient) url(path string, query url.Values) string {
	s := strings.TrimSuffix(c.base.String(), "/") + path
	if len(query) > 0 {
		s += "?" + query.Encode()
	}
	return s
}

// apiCall is one request of the native API: method, path, query (may be
// nil) and a body sent as JSON (nil: none).
type apiCall struct {
	method, path string
	query        url.Values
	body         any
}

// request sends a request and returns the response of a 2xx status; other
// statuses become *apiError, transport failures an exitUnavailable error.
// A zero timeout means none (tails). The caller closes the body.
func (c *apiClient) request(ctx context.Context, ac apiCall, header http.Header) (*http.Response, context.CancelFunc, error) {
	method, path, query, body := ac.method, ac.path, ac.query, ac.body
	cancel := context.CancelFunc(func() {})
	if c.timeout > 0 && header.Get("Accept") != "text/event-stream" {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			cancel()
			return nil, nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, query), rd)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.authorize != nil {
		c.authorize(req)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		return nil, nil, c.transportError(err)
	}
	if resp.StatusCode/100 != 2 {
		defer cancel()
		defer resp.Body.Close()
		e := &apiError{Status: resp.StatusCode}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = json.Unmarshal(raw, e)
		return nil, nil, &exitError{code: e.ExitCode(), err: e}
	}
	return resp, cancel, nil
}

func (c *apiClient) transportError(err error) error {
	var opErr *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &opErr) {
		return &exitError{code: exitUnavailable, err: fmt.Errorf("cannot reach the broker at %s: %v; is it running? (set --server or BROKER_HTTP_ADDR)", c.base, err)}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &exitError{code: exitUnavailable, err: fmt.Errorf("no answer from %s within %v (--timeout)", c.base, c.timeout)}
	}
	return &exitError{code: exitUnavailable, err: fmt.Errorf("request to %s failed: %v", c.base, err)}
}

// call sends a JSON request and decodes a JSON answer into out (if not nil).
// It returns the status code.
func (c *apiClient) call(ctx context.Context, ac apiCall, out any) (int, error) {
	resp, cancel, err := c.request(ctx, ac, http.Header{})
	if err != nil {
		return 0, err
	}
	defer cancel()
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("cannot decode the broker's answer: %w", err)
	}
	return resp.StatusCode, nil
}

// callProgress sends a request asking for NDJSON progress lines and
// reports each to progress; the final result is decoded into out.
func (c *apiClient) callProgress(ctx context.Context, ac apiCall, out any, progress func(done, total int64)) error {
	resp, cancel, err := c.request(ctx, ac, http.Header{"Accept": {"application/x-ndjson"}})
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var line struct {
			Progress *struct{ Done, Total int64 } `json:"progress"`
			Result   json.RawMessage              `json:"result"`
			Error    *apiError                    `json:"error"`
		}
		if err := dec.Decode(&line); err != nil {
			if errors.Is(err, io.EOF) {
				return &exitError{code: exitUnavailable, err: errors.New("the broker closed the connection before the end of the operation")}
			}
			return c.transportError(err)
		}
		switch {
		case line.Progress != nil:
			if progress != nil {
				progress(line.Progress.Done, line.Progress.Total)
			}
		case line.Error != nil:
			line.Error.Status = 500
			if line.Error.Code == "storage_unavailable" || line.Error.Code == "storage_full" {
				line.Error.Status = http.StatusServiceUnavailable
			}
			return &exitError{code: line.Error.ExitCode(), err: line.Error}
		case line.Result != nil:
			return json.Unmarshal(line.Result, out)
		}
	}
}

// printJSON writes v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable is the writer of the client subcommands' tables: columns
// separated by at least two spaces.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// progressBar draws "label [#####.....]  50%  5/10 unit" on a terminal,
// redrawn at most every 100 ms. On anything else it draws nothing.
type progressBar struct {
	w       io.Writer
	label   string
	unit    string
	enabled bool
	last    time.Time
	drawn   bool
}

func newProgressBar(w io.Writer, label, unit string) *progressBar {
	return &progressBar{w: w, label: label, unit: unit, enabled: isTerminal(w)}
}

func (p *progressBar) update(done, total int64) {
	if !p.enabled || (time.Since(p.last) < 100*time.Millisecond && done < total) {
		return
	}
	p.last = time.Now()
	const width = 30
	fill := 0
	percent := 0
	if total > 0 {
		fill = int(min(done, total) * width / total)
		percent = int(min(done, total) * 100 / total)
	}
	fmt.Fprintf(p.w, "\r%s [%s%s] %3d%%  %s/%s %s ", p.label, strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		percent, humanCount(done, p.unit), humanCount(total, p.unit), p.unit)
	p.drawn = true
}

// done ends the bar's line.
func (p *progressBar) done() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

func humanCount(n int64, unit string) string {
	if unit != "bytes" {
		return fmt.Sprint(n)
	}
	return humanBytes(n)
}

func humanBytes(n int64) string {
	const k = 1024
	switch {
	case n >= k*k*k:
		return fmt.Sprintf("%.1fGiB", float64(n)/(k*k*k))
	case n >= k*k:
		return fmt.Sprintf("%.1fMiB", float64(n)/(k*k))
	case n >= k:
		return fmt.Sprintf("%.1fKiB", float64(n)/k)
	}
	return fmt.Sprintf("%dB", n)
}

// stderrOf is the command's error writer (os.Stderr outside tests).
func stderrOf(cCtx *cli.Context) io.Writer {
	if cCtx.App.ErrWriter != nil {
		return cCtx.App.ErrWriter
	}
	return os.Stderr
}
