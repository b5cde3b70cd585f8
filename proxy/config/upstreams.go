package config

import (
	"strings"

	"github.com/smarter-compact/smarter-compact/proxy"
)

// UpstreamsIn returns the upstream base URLs that config.toml's text b (read from path; nil:
// no file) puts in effect, parsed by DecodeFile's rules, as `install` reads them to chain an
// agent's gateway: family maps each API family to [upstream]'s key over the proxy's default,
// trailing slashes dropped; agents maps agent to family to the [upstream.agents.<agent>]
// keys as written (empty, not nil, without any). An error is DecodeFile's.
func UpstreamsIn(path string, b []byte) (family map[string]string, agents map[string]map[string]string, err error) {
	var f File
	if b != nil {
		if err := DecodeFile(path, b, &f); err != nil {
			return nil, nil, err
		}
	}
	family, agents = proxy.DefaultSettings().Upstreams, map[string]map[string]string{}
	for fam, p := range f.Families() {
		if p != nil {
			family[fam] = strings.TrimRight(*p, "/")
		}
	}
	for _, agent := range ConfiguredAgents {
		for fam, p := range f.AgentUpstreams(agent).ByFamily() {
			if p != nil {
				if agents[agent] == nil {
					agents[agent] = map[string]string{}
				}
				agents[agent][fam] = *p
			}
		}
	}
	return family, agents, nil
}
