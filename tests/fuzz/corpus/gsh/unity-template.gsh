version: 1.0
builds:
  my build: # replace with the name for your build
    executableName: Build.x86_64 # the name of your build executable
    buildPath: Builds/Multiplay # the location of the build files
    excludePaths: # paths to exclude from upload (supports only basic patterns)
      - Builds/Multiplay/DoNotShip/*.*
      - Builds/Multiplay/Server_Data/app.info
buildConfigurations:
  my build configuration: # replace with the name for your build configuration
    build: my build # replace with the name for your build
    queryType: sqp # sqp or a2s, delete if you do not have logs to query
    binaryPath: Build.x86_64 # the name of your build executable
    commandLine: -port $$port$$ -queryport $$query_port$$ -log $$log_dir$$/Engine.log
    variables: {}
fleets:
  my fleet: # replace with the name for your fleet
    buildConfigurations:
      - my build configuration # replace with the names of your build configuration
    regions:
      North America: # North America, Europe, Asia, South America, Australia
        minAvailable: 0 # minimum number of servers running in the region
        maxServers: 1 # maximum number of servers running in the region
    usageSettings:
      - hardwareType: CLOUD # Can be CLOUD or METAL.
        machineType: GCP-N2 # For METAL setting: please omit this field.
        maxServersPerMachine: 2 # For CLOUD setting: required. For METAL: optional.
