builds:
  b: {buildPath: /srv/game}
buildConfigurations:
  small: {build: b, cores: 2, speedMhz: 1200, memoryMiB: 1500, queryType: a2s, readiness: false}
  big: {build: b, cores: 2, speedMhz: 1200, memoryMiB: 1500, queryType: a2s, readiness: false,
        commandLine: "-big ${PORT}"}
fleets:
  anywhere: {buildConfigurations: [small, big]}
  europe:
    buildConfigurations: [big]
    regions: {Europe: {minAvailable: 0, maxServers: 3, online: true}, Asia: {online: false}}
