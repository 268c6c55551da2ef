package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// healthcheckCommand asks a running broker's GET /readyz, for container
// health checks (the image has no curl): exit 0 when ready, 1 otherwise.
func healthcheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "healthcheck",
		Usage: "exit 0 if the broker at --http-addr answers GET /readyz with 200 (for Docker HEALTHCHECK)",
		Description: "Reads the same BROKER_HTTP_ADDR as serve; a listener on every interface (:8080, 0.0.0.0:8080)\n" +
			"is asked on 127.0.0.1. Exit codes: 0 ready, 1 not ready or unreachable, 2 usage.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "http-addr", Value: "localhost:8080", EnvVars: []string{envName("http-addr")},
				Usage: "host:port of the broker's HTTP listener"},
			&cli.DurationFlag{Name: timeoutFlag, Value: 3 * time.Second, Usage: "give up after this long"},
			&cli.BoolFlag{Name: "http-tls", EnvVars: []string{envName("http-tls")},
				Usage: "the listener serves HTTPS (serve's http-tls); the certificate is checked against " + clientSecurityEnv["tls-ca-file"] + " when set"},
		},
		Action: func(cCtx *cli.Context) error {
			if cCtx.Args().Present() {
				return usageErrorf("healthcheck takes no arguments, got %q", cCtx.Args().First())
			}
			url, err := readyzURL(cCtx.String("http-addr"))
			if err != nil {
				return usageErrorf("healthcheck: --http-addr: %v", err)
			}
			client := http.DefaultClient
			if cCtx.Bool("http-tls") {
				url = "https" + strings.TrimPrefix(url, "http")
				if client, err = healthcheckTLSClient(); err != nil { // security.go
					return usageErrorf("healthcheck: %v", err)
				}
			}
			ctx, cancel := context.WithTimeout(cCtx.Context, cCtx.Duration(timeoutFlag))
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return usageErrorf("healthcheck: %v", err)
			}
			resp, err := client.Do(req)
			if err != nil {
				return fmt.Errorf("healthcheck: %w", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("healthcheck: GET %s: %s", url, resp.Status)
			}
			_, err = fmt.Fprintf(cCtx.App.Writer, "ready\n")
			return err
		},
	}
}

// readyzURL is the /readyz URL of a listener at addr; an unspecified host
// (":8080", "0.0.0.0:8080", "[::]:8080") is asked on the loopback address.
func readyzURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

// Shell completion: urfave/cli answers --generate-bash-completion with the
// commands, subcommands or flags that can follow; these scripts ask it.
const bashCompletion = `# bash completion for broker: source <(broker completion bash)
_broker_complete() {
	local cur opts
	COMPREPLY=()
	cur="${COMP_WORDS[COMP_CWORD]}"
	if [[ "$cur" == "-"* ]]; then
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
	else
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
	fi
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	return 0
}
complete -o bashdefault -o default -F _broker_complete broker
`

const zshCompletion = `#compdef broker
# zsh completion for broker: broker completion zsh > "${fpath[1]}/_broker"
_broker() {
	local -a opts
	local cur=${words[-1]}
	if [[ "$cur" == "-"* ]]; then
		opts=("${(@f)$(${words[@]:0:#words[@]-1} "$cur" --generate-bash-completion 2>/dev/null)}")
	else
		opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
	fi
	if [[ "${opts[1]}" != "" ]]; then
		_describe 'values' opts
	else
		_files
	fi
}
if [[ "$funcstack[1]" = "_broker" ]]; then
	_broker "$@"
else
	compdef _broker broker
fi
`

// completionCommand prints a shell completion script.
func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: "bash: source <(broker completion bash), or save it in /etc/bash_completion.d/broker\n" +
			"zsh:  broker completion zsh > \"${fpath[1]}/_broker\"\n" +
			"fish: broker completion fish > ~/.config/fish/completions/broker.fish",
		Action: func(cCtx *cli.Context) error {
			if cCtx.NArg() != 1 {
				return usageErrorf("completion takes one argument, the shell: bash, zsh or fish")
			}
			var script string
			switch shell := cCtx.Args().First(); shell {
			case "bash":
				script = bashCompletion
			case "zsh":
				script = zshCompletion
			case "fish":
				s, err := cCtx.App.ToFishCompletion()
				if err != nil {
					return err
				}
				script = s
			default:
				return usageErrorf("completion: unknown shell %q; use bash, zsh or fish", shell)
			}
			_, err := fmt.Fprint(cCtx.App.Writer, script)
			return err
		},
	}
}
