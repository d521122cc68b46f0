"""repo_paths.py: where the checkout's parts are, from this file's place in it
(launch/ddp_tools/common/): the repository root, whose build/ddp_train the
tools default to, and launch/, whose entry scripts (launch/torch_reference.py,
launch/plot_sweep.py) a tool runs by path under another interpreter.
Standard library only."""
import os

LAUNCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO = os.path.dirname(LAUNCH)
