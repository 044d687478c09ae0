from rewardsmith.cli import main

main()
