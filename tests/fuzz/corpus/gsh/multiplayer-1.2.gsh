version: 1.0
builds:
  my build:
    executableName: Build.x86_64
    buildPath: Builds/Multiplay
    buildOptions: 16384
    buildProfile:
      guid: 5e8f3a0c2b1d4e6f9a7b8c0d1e2f3a4b
      id: -7253436483453474034
    excludePaths: []
buildConfigurations:
  my build configuration:
    build: my build
    queryType: sqp
    binaryPath: Build.x86_64
    commandLine: -port $$port$$ -queryport $$query_port$$ -log $$log_dir$$/Engine.log
    variables: {}
fleets:
  my fleet:
    architecture: Amd64
    buildConfigurations:
      - my build configuration
    regions:
      Europe:
        minAvailable: 0
        maxServers: 1
    usageSettings:
      - hardwareType: METAL
        speed: 1500
        memory: 1024
  arm fleet:
    architecture: Arm64
    buildConfigurations: [my build configuration]
