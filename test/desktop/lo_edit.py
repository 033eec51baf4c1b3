#!/usr/bin/python3
# Open a document in the mount with LibreOffice (headless, driven over UNO),
# append a line, save it in place and close it: the open-edit-save cycle of a
# desktop user. Usage: lo_edit.py FILE TEXT   (needs Debian's python3-uno)
import os, subprocess, sys, tempfile, time
import uno
from com.sun.star.beans import PropertyValue

path, text = os.path.abspath(sys.argv[1]), sys.argv[2]
home = tempfile.mkdtemp(prefix='lo-home-')
pipe = 'svcfs_lo_%d' % os.getpid()
office = subprocess.Popen(['soffice', '--headless', '--invisible', '--norestore', '--nologo',
                           '-env:UserInstallation=file://' + home,
                           '--accept=pipe,name=%s;urp;' % pipe],
                          env=dict(os.environ, HOME=home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext('com.sun.star.bridge.UnoUrlResolver', local)
    ctx = None
    for _ in range(120):
        try:
            ctx = resolver.resolve('uno:pipe,name=%s;urp;StarOffice.ComponentContext' % pipe)
            break
        except Exception:
            time.sleep(0.5)
    if ctx is None:
        sys.exit('LibreOffice did not start')
    desktop = ctx.ServiceManager.createInstanceWithContext('com.sun.star.frame.Desktop', ctx)
    hidden = PropertyValue(); hidden.Name = 'Hidden'; hidden.Value = True
    doc = desktop.loadComponentFromURL(uno.systemPathToFileUrl(path), '_blank', 0, (hidden,))
    if doc is None:
        sys.exit('could not open ' + path)
    body = doc.getText()
    body.insertString(body.getEnd(), '\n' + text, False)
    doc.store()
    doc.close(True)
    try:
        desktop.terminate()
    except Exception:
        pass  # the bridge goes away with the office
finally:
    try:
        office.wait(timeout=30)
    except subprocess.TimeoutExpired:
        office.kill()
    subprocess.run(['rm', '-rf', home])
print('saved')
