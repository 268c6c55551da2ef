package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/urfave/cli/v2"

	"github.com/vibemq/broker/auth"
)

// Client security of the subcommands that talk the Kafka protocol (users,
// topics, groups): flags on `broker users`, and for every such command the
// environment variables below (read even where no flag is declared).
var clientSecurityEnv = map[string]string{
	"security-protocol":  "BROKER_CLIENT_SECURITY_PROTOCOL",
	"sasl-mechanism":     "BROKER_CLIENT_SASL_MECHANISM",
	"sasl-user":          "BROKER_CLIENT_SASL_USER",
	"sasl-password-file": "BROKER_CLIENT_SASL_PASSWORD_FILE",
	"tls-ca-file":        "BROKER_CLIENT_TLS_CA_FILE",
	"tls-cert-file":      "BROKER_CLIENT_TLS_CERT_FILE",
	"tls-key-file":       "BROKER_CLIENT_TLS_KEY_FILE",
}

// clientPasswordEnv holds the client's SASL password when no file does.
const clientPasswordEnv = "BROKER_CLIENT_SASL_PASSWORD"

// userPasswordEnv holds the password `broker users create|passwd` sets
// when --password-file is not given and stdin is not used.
const userPasswordEnv = "BROKER_USER_PASSWORD"

// isClientEnv reports whether name is a BROKER_* variable of the client
// subcommands or of the bootstrap user, which serve accepts and ignores
// (or reads itself, for the bootstrap password).
func isClientEnv(name string) bool {
	if name == clientPasswordEnv || name == userPasswordEnv || name == bootstrapPasswordEnv || name == clientTokenFileEnv || name == clientTokenEnv {
		return true
	}
	for _, e := range clientSecurityEnv {
		if e == name {
			return true
		}
	}
	return false
}

func clientSecurityFlags() []cli.Flag {
	usage := map[string]string{
		"security-protocol":  "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (as the listener at --bootstrap-server)",
		"sasl-mechanism":     "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
		"sasl-user":          "SASL user name",
		"sasl-password-file": "file holding the SASL password (else " + clientPasswordEnv + ")",
		"tls-ca-file":        "PEM CA that signs the broker's certificate (default: the system roots)",
		"tls-cert-file":      "PEM client certificate (mutual TLS)",
		"tls-key-file":       "PEM key of --tls-cert-file",
	}
	defaults := map[string]string{"security-protocol": "PLAINTEXT", "sasl-mechanism": "SCRAM-SHA-512"}
	var flags []cli.Flag
	for _, name := range []string{"security-protocol", "sasl-mechanism", "sasl-user", "sasl-password-file", "tls-ca-file", "tls-cert-file", "tls-key-file"} {
		flags = append(flags, &cli.StringFlag{Name: name, Value: defaults[name], Usage: usage[name], EnvVars: []string{clientSecurityEnv[name]}})
	}
	return flags
}

// clientSecurityValue reads a client security setting: the flag where the
// command declares it, else its environment variable, else the default.
func clientSecurityValue(cCtx *cli.Context, name string) string {
	if cCtx.IsSet(name) {
		return cCtx.String(name)
	}
	if v := os.Getenv(clientSecurityEnv[name]); v != "" {
		return v
	}
	for _, f := range cCtx.Command.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == name {
			return sf.Value
		}
	}
	switch name {
	case "security-protocol":
		return "PLAINTEXT"
	case "sasl-mechanism":
		return "SCRAM-SHA-512"
	}
	return ""
}

// clientSecurityOpts are the franz-go options for the client security
// settings.
func clientSecurityOpts(cCtx *cli.Context) ([]kgo.Opt, error) {
	proto := strings.ToUpper(clientSecurityValue(cCtx, "security-protocol"))
	var opts []kgo.Opt
	switch proto {
	case "PLAINTEXT":
		return nil, nil
	case "SSL", "SASL_SSL":
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if ca := clientSecurityValue(cCtx, "tls-ca-file"); ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return nil, usageErrorf("--tls-ca-file: %v", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, usageErrorf("--tls-ca-file %s holds no PEM certificate", ca)
			}
		}
		if cert := clientSecurityValue(cCtx, "tls-cert-file"); cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, clientSecurityValue(cCtx, "tls-key-file"))
			if err != nil {
				return nil, usageErrorf("--tls-cert-file and --tls-key-file: %v", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	case "SASL_PLAINTEXT":
	default:
		return nil, usageErrorf("--security-protocol %q is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", proto)
	}
	if !strings.HasPrefix(proto, "SASL_") {
		return opts, nil
	}
	user := clientSecurityValue(cCtx, "sasl-user")
	if user == "" {
		return nil, usageErrorf("--security-protocol %s needs --sasl-user (or %s)", proto, clientSecurityEnv["sasl-user"])
	}
	password := os.Getenv(clientPasswordEnv)
	if f := clientSecurityValue(cCtx, "sasl-password-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, usageErrorf("--sasl-password-file: %v", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	if password == "" {
		return nil, usageErrorf("no SASL password: give --sasl-password-file or set %s", clientPasswordEnv)
	}
	switch mech := strings.ToUpper(clientSecurityValue(cCtx, "sasl-mechanism")); mech {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()))
	default:
		return nil, usageErrorf("--sasl-mechanism %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
	}
	return opts, nil
}

// usersCommand manages SCRAM users on a running broker over the Kafka
// protocol (DescribeUserScramCredentials, AlterUserScramCredentials), like
// `broker topics`; the password is salted by the client, so the broker
// never sees it.
func usersCommand() *cli.Command {
	common := append([]cli.Flag{bootstrapFlag()}, clientSecurityFlags()...)
	setFlags := append([]cli.Flag{
		&cli.StringFlag{Name: "mechanism", Value: "all", Usage: "SCRAM-SHA-256, SCRAM-SHA-512 or all"},
		&cli.IntFlag{Name: "iterations", Value: 8192, Usage: "SCRAM iterations, 4096-16384"},
		&cli.StringFlag{Name: "password-file", Usage: "file holding the new password (else " + userPasswordEnv + ", else one line of stdin with --password-stdin)"},
		&cli.BoolFlag{Name: "password-stdin", Usage: "read the new password from the first line of stdin"},
	}, common...)
	return &cli.Command{
		Name:  "users",
		Usage: "create, list, delete SCRAM users and change their passwords on a running broker",
		Subcommands: []*cli.Command{
			{Name: "create", Usage: "create a user with SCRAM credentials (fails if the user exists)", ArgsUsage: "USER", Flags: setFlags,
				Action: func(cCtx *cli.Context) error { return usersSet(cCtx, true) }},
			{Name: "passwd", Usage: "change an existing user's password", ArgsUsage: "USER", Flags: setFlags,
				Action: func(cCtx *cli.Context) error { return usersSet(cCtx, false) }},
			{Name: "list", Usage: "list users with their SCRAM mechanisms and iterations", Flags: common, Action: usersList},
			{Name: "delete", Usage: "delete every SCRAM credential of users", ArgsUsage: "USER...", Flags: common, Action: usersDelete},
		},
	}
}

func usersAdmin(cCtx *cli.Context) (*kadm.Client, func(), error) {
	adm, ctx, done, err := kafkaAdmin(cCtx, topicsCommandTimeout)
	if err != nil {
		return nil, nil, err
	}
	cCtx.Context = ctx
	return adm, done, nil
}

func newPassword(cCtx *cli.Context) (string, error) {
	var pw string
	switch {
	case cCtx.String("password-file") != "":
		b, err := os.ReadFile(cCtx.String("password-file"))
		if err != nil {
			return "", usageErrorf("--password-file: %v", err)
		}
		pw = string(b)
	case cCtx.Bool("password-stdin"):
		b, err := io.ReadAll(io.LimitReader(cCtx.App.Reader, 4096))
		if err != nil {
			return "", err
		}
		pw, _, _ = strings.Cut(string(b), "\n")
	default:
		pw = os.Getenv(userPasswordEnv)
	}
	pw = strings.TrimRight(pw, "\r\n")
	if pw == "" {
		return "", usageErrorf("no password: give --password-file, --password-stdin or set %s", userPasswordEnv)
	}
	return pw, nil
}

func usersSet(cCtx *cli.Context, create bool) error {
	if cCtx.NArg() != 1 {
		return usageErrorf("broker users %s takes one user name, got %d arguments (flags go before the user name)", cCtx.Command.Name, cCtx.NArg())
	}
	user := cCtx.Args().First()
	var mechs []kadm.ScramMechanism
	switch m := strings.ToUpper(cCtx.String("mechanism")); m {
	case "ALL":
		mechs = []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512}
	case "SCRAM-SHA-256":
		mechs = []kadm.ScramMechanism{kadm.ScramSha256}
	case "SCRAM-SHA-512":
		mechs = []kadm.ScramMechanism{kadm.ScramSha512}
	default:
		return usageErrorf("--mechanism %q is not SCRAM-SHA-256, SCRAM-SHA-512 or all", m)
	}
	if it := cCtx.Int("iterations"); it < auth.MinIterations || it > auth.MaxIterations {
		return usageErrorf("--iterations %d is outside %d-%d (RFC 7677 asks for at least 4096)", it, auth.MinIterations, auth.MaxIterations)
	}
	pw, err := newPassword(cCtx)
	if err != nil {
		return err
	}
	adm, done, err := usersAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	existing, err := adm.DescribeUserSCRAMs(cCtx.Context, user)
	d, described := existing[user]
	switch {
	case !described && err != nil:
		return fmt.Errorf("looking up user %s: %w", user, err)
	case described && d.Err != nil && !errors.Is(d.Err, kerr.ResourceNotFound):
		return fmt.Errorf("looking up user %s: %w", user, d.Err)
	}
	exists := described && d.Err == nil && len(d.CredInfos) > 0
	switch {
	case create && exists:
		return fmt.Errorf("user %s exists already; use broker users passwd to change its password", user)
	case !create && !exists:
		return fmt.Errorf("user %s does not exist; create it with broker users create", user)
	}
	var ups []kadm.UpsertSCRAM
	for _, m := range mechs {
		ups = append(ups, kadm.UpsertSCRAM{User: user, Mechanism: m, Iterations: int32(cCtx.Int("iterations")), Password: pw})
	}
	res, err := adm.AlterUserSCRAMs(cCtx.Context, nil, ups)
	if err != nil {
		return fmt.Errorf("storing user %s: %w", user, err)
	}
	if err := res.Error(); err != nil {
		return brokerError("storing user "+user, err, res[user].ErrMessage)
	}
	verb := "created"
	if !create {
		verb = "password changed"
	}
	fmt.Fprintf(cCtx.App.Writer, "user %s %s\n", user, verb)
	return nil
}

func usersList(cCtx *cli.Context) error {
	adm, done, err := usersAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.DescribeUserSCRAMs(cCtx.Context)
	if err != nil {
		return fmt.Errorf("listing users: %w", err)
	}
	names := make([]string, 0, len(res))
	for u := range res {
		names = append(names, u)
	}
	sort.Strings(names)
	w := newTable(cCtx.App.Writer)
	fmt.Fprintln(w, "USER\tMECHANISM\tITERATIONS")
	for _, u := range names {
		for _, ci := range res[u].CredInfos {
			fmt.Fprintf(w, "%s\t%s\t%d\n", u, ci.Mechanism, ci.Iterations)
		}
	}
	return w.Flush()
}

func usersDelete(cCtx *cli.Context) error {
	if cCtx.NArg() == 0 {
		return usageErrorf("broker users delete takes one or more user names")
	}
	adm, done, err := usersAdmin(cCtx)
	if err != nil {
		return err
	}
	defer done()
	users := cCtx.Args().Slice()
	described, err := adm.DescribeUserSCRAMs(cCtx.Context, users...)
	if err != nil && len(described) == 0 {
		return fmt.Errorf("looking up users: %w", err)
	}
	var dels []kadm.DeleteSCRAM
	for _, u := range users {
		d := described[u]
		if d.Err != nil || len(d.CredInfos) == 0 {
			return fmt.Errorf("user %s does not exist", u)
		}
		for _, ci := range d.CredInfos {
			dels = append(dels, kadm.DeleteSCRAM{User: u, Mechanism: ci.Mechanism})
		}
	}
	res, err := adm.AlterUserSCRAMs(cCtx.Context, dels, nil)
	if err != nil {
		return fmt.Errorf("deleting users: %w", err)
	}
	if err := res.Error(); err != nil {
		return fmt.Errorf("deleting users: %w", err)
	}
	for _, u := range users {
		fmt.Fprintf(cCtx.App.Writer, "user %s deleted\n", u)
	}
	return nil
}
