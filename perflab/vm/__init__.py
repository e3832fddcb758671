"""Virtual machines with the topology a lab needs: profiles, the guest image, QEMU, the guest agent.

Kept free of imports: the guest agent imports perflab.vm.protocol with nothing but the standard library.
"""
