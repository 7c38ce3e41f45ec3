version: 1.0
builds:
  LinuxServer:
    executableName: Game.x86_64
    buildPath: Builds/Server
    excludePaths: []
buildConfigurations:
  ranked:
    build: LinuxServer
    queryType: sqp
    binaryPath: Game.x86_64
    commandLine: -port $$port$$ -queryport $$query_port$$ -logFile $$log_dir$$/server.log -batchmode -nographics
    variables:
      map: de_dust
      maxPlayers: 10
    readiness: true
  casual:
    build: LinuxServer
    queryType: sqp
    binaryPath: /opt/casual/Game.x86_64
    commandLine: '-mode "casual play" -port $$port$$'
    variables: {mode: casual}
fleets:
  eu-fleet:
    buildConfigurations:
      - ranked
      - casual
    regions:
      Europe:
        minAvailable: 2
        maxServers: 20
      North America:
        minAvailable: 1
        maxServers: 10
    usageSettings:
      - hardwareType: METAL
        speed: 1500
        memory: 2048
        maxServersPerCore: 2
        maxServersPerMachine: 12
  us-fleet:
    buildConfigurations: [casual]
    regions:
      North America: {minAvailable: 1, maxServers: 5}
